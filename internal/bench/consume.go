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

// span is what is still to be read of one partition: offsets next up to,
// not including, end.
type span struct{ next, end int64 }

// consume reads every partition tp from start[tp] up to, not including,
// end[tp], with direct partition assignment (no group), and counts what it
// read inside that range. meter takes the CPU time over the same span as
// the throughput.
func consume(ctx context.Context, cfg Config, brokers []string, meter cpuMeter, start, end map[topicPartition]int64) (ConsumeStats, error) {
	offsets := make(map[string]map[int32]kgo.Offset)
	// One lookup per record, however many partitions the run covers.
	spans := make(map[topicPartition]*span, len(start))
	pending := 0
	for tp, s := range start {
		if end[tp] <= s {
			continue
		}
		ps := offsets[tp.topic]
		if ps == nil {
			ps = make(map[int32]kgo.Offset)
			offsets[tp.topic] = ps
		}
		ps[tp.partition] = kgo.NewOffset().At(s)
		spans[tp] = &span{next: s, end: end[tp]}
		pending++
	}
	var st ConsumeStats
	if pending == 0 {
		return st, nil
	}
	cpu0 := meter.sample()
	t0 := time.Now()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(offsets),
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
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			sp := spans[topicPartition{p.Topic, p.Partition}]
			if sp == nil || sp.next >= sp.end {
				return
			}
			for _, r := range p.Records {
				if r.Offset < sp.next || r.Offset >= sp.end {
					continue
				}
				st.Records++
				st.Bytes += int64(len(r.Value))
				read = true
				sp.next = r.Offset + 1
				if sp.next >= sp.end {
					pending--
				}
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
	st.CPU = meter.sample().since(cpu0, st.Records)
	st.RecordsPerSec = perSec(st.Records, st.Elapsed)
	st.MBPerSec = perSec(st.Bytes, st.Elapsed) / 1e6
	return st, nil
}
