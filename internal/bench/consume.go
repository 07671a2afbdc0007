package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoProgress means the consumer read nothing for --consume-idle-timeout
// while records it expected were still missing.
var ErrNoProgress = errors.New("bench: consumer made no progress")

// consume reads partition p of topic from start[p] up to, not including,
// end[p], with direct partition assignment (no group), and counts what it
// read inside that range.
func consume(ctx context.Context, cfg Config, brokers []string, topic string, start, end map[int32]int64) (ConsumeStats, error) {
	offsets := make(map[int32]kgo.Offset, len(start))
	next := make(map[int32]int64, len(start)) // next offset still wanted, per partition
	pending := 0
	for p, s := range start {
		if end[p] > s {
			offsets[p] = kgo.NewOffset().At(s)
			next[p] = s
			pending++
		}
	}
	var st ConsumeStats
	if pending == 0 {
		return st, nil
	}
	t0 := time.Now()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(time.Second),
	)
	if err != nil {
		return st, fmt.Errorf("bench: consumer client: %w", err)
	}
	defer cl.Close()

	lastProgress := time.Now()
	for pending > 0 {
		pctx, cancel := context.WithTimeout(ctx, cfg.ConsumeTimeout)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return st, err
		}
		read := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] || r.Offset >= end[r.Partition] {
				return
			}
			st.Records++
			st.Bytes += int64(len(r.Value))
			read = true
			next[r.Partition] = r.Offset + 1
			if r.Offset+1 >= end[r.Partition] {
				pending--
			}
		})
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return st, fmt.Errorf("bench: fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		if read {
			lastProgress = time.Now()
		} else if time.Since(lastProgress) >= cfg.ConsumeTimeout {
			return st, fmt.Errorf("%w for %v: read %d records", ErrNoProgress, cfg.ConsumeTimeout, st.Records)
		}
	}
	st.Elapsed = time.Since(t0)
	st.RecordsPerSec = perSec(st.Records, st.Elapsed)
	st.MBPerSec = perSec(st.Bytes, st.Elapsed) / 1e6
	return st, nil
}
