package server

import (
	"context"
	"time"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// newLag builds the lag tracker over the engine. Its groups come from the
// coordinator, which needs the tracker as its commit observer: set
// lagGroups.c once the coordinator exists.
func newLag(cfg config.Lag, engine *log.Engine) (*lag.Tracker, *lagGroups) {
	lg := &lagGroups{}
	t := lag.NewTracker(lag.Config{Window: cfg.Window, MinDistance: cfg.MinDistance, StoppedAfter: cfg.StoppedAfter,
		MaxPartitions: cfg.MaxPartitions}, lagLog{engine}, lg)
	return t, lg
}

// lagLog reads offsets and timestamps from the engine.
type lagLog struct{ e *log.Engine }

func (l lagLog) Offsets(topic string, partition int32) (int64, int64, error) {
	p, err := l.e.Partition(topic, partition)
	if err != nil {
		return 0, 0, err
	}
	return p.LogStartOffset(), p.HighWatermark(), nil
}

// lagReadBytes is how much of a partition one timestamp lookup reads.
const lagReadBytes = 64 << 10

func (l lagLog) Timestamp(topic string, partition int32, offset int64) (int64, bool, error) {
	p, err := l.e.Partition(topic, partition)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want := offset
	for range 16 { // read past at most this many chunks of transaction markers
		rr, err := p.Read(ctx, want, lagReadBytes, true)
		if err != nil {
			return 0, false, err
		}
		b := rr.Records
		if len(b) == 0 {
			return 0, false, nil
		}
		for len(b) >= batch.HeaderSize {
			n, err := batch.Size(b)
			if err != nil || n > len(b) {
				break
			}
			bt := b[:n]
			b = b[n:]
			if batch.LastOffset(bt) < want {
				continue
			}
			if batch.Attributes(bt)&batch.AttrControl != 0 {
				want = batch.LastOffset(bt) + 1
				continue
			}
			return recordTimestamp(ctx, p, bt, want), true, nil
		}
	}
	return 0, false, nil
}

// recordTimestamp is the timestamp of the first record at or after want in
// the batch bt: the batch's own for LogAppendTime, the first timestamp
// when the batch does not decode.
func recordTimestamp(ctx context.Context, p *log.Partition, bt []byte, want int64) int64 {
	h, err := batch.ParseHeader(bt)
	if err != nil {
		return batch.MaxTimestamp(bt)
	}
	if h.Attributes&batch.AttrLogAppendTime != 0 {
		return h.MaxTimestamp
	}
	x, err := p.DecodeRecords(ctx, bt)
	if err != nil {
		return h.FirstTimestamp
	}
	defer x.Release()
	for _, r := range x.Records {
		if h.BaseOffset+int64(r.OffsetDelta) >= want {
			return h.FirstTimestamp + r.TimestampDelta64
		}
	}
	return h.MaxTimestamp
}

// lagGroups lists the coordinator's groups for the tracker.
type lagGroups struct{ c *group.Coordinator }

func (l *lagGroups) Groups() ([]lag.GroupOffsets, error) {
	listed, err := l.c.List()
	if err != nil {
		return nil, err
	}
	out := make([]lag.GroupOffsets, 0, len(listed))
	for _, g := range listed {
		offs, err := l.c.FetchOffsets(g.Group, nil)
		if err != nil || len(offs) == 0 {
			continue // moved away, or nothing committed: no lag to speak of
		}
		gl := lag.GroupOffsets{Group: g.Group, State: g.State, Offsets: make([]lag.Committed, len(offs))}
		for i, o := range offs {
			gl.Offsets[i] = lag.Committed{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, CommitTime: o.CommitTime}
		}
		if g.Type == "consumer" {
			if d := l.c.DescribeConsumerGroups([]string{g.Group}); len(d) == 1 {
				gl.Members = len(d[0].Members)
			}
		} else if d := l.c.Describe([]string{g.Group}); len(d) == 1 {
			gl.Members = len(d[0].Members)
		}
		out = append(out, gl)
	}
	return out, nil
}
