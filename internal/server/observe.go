package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/catalog"
	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/observe"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitObservers tells several observers of every commit.
type commitObservers []group.CommitObserver

func (o commitObservers) Committed(g string, offsets []group.ObservedCommit) {
	for _, x := range o {
		x.Committed(g, offsets)
	}
}

// lineageCommits records a Consume edge per group and topic committed.
type lineageCommits struct{ r *lineage.Recorder }

func (l lineageCommits) Committed(g string, offsets []group.ObservedCommit) {
	last := ""
	for _, o := range offsets {
		if o.Topic != last {
			l.r.Consumed(g, o.Topic)
			last = o.Topic
		}
	}
}

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
		l.members(&gl, g.Type == "consumer")
		out = append(out, gl)
	}
	return out, nil
}

// members fills in gl's generation, members and their assignments.
func (l *lagGroups) members(gl *lag.GroupOffsets, consumerProtocol bool) {
	if consumerProtocol {
		d := l.c.DescribeConsumerGroups([]string{gl.Group})
		if len(d) != 1 || d[0].Err != nil {
			return
		}
		gl.Generation = d[0].Epoch
		for _, m := range d[0].Members {
			lm := lag.Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			for _, a := range m.Assignment {
				for _, p := range a.Partitions {
					lm.Assigned = append(lm.Assigned, lag.TopicPartition{Topic: a.Topic, Partition: p})
				}
			}
			gl.Members = append(gl.Members, lm)
		}
		return
	}
	d := l.c.Describe([]string{gl.Group})
	if len(d) != 1 || d[0].Err != nil {
		return
	}
	gl.Generation = d[0].Generation
	for _, m := range d[0].Members {
		lm := lag.Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if d[0].ProtocolType == "consumer" && len(m.Assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(m.Assignment) == nil {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						lm.Assigned = append(lm.Assigned, lag.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
		}
		gl.Members = append(gl.Members, lm)
	}
}

// Partitions is the topic's partition count (diagnose.Log).
func (l lagLog) Partitions(topic string) (int32, error) {
	t, ok := l.e.Topic(topic)
	if !ok {
		return 0, fmt.Errorf("unknown topic %s", topic)
	}
	return t.Partitions, nil
}

// SampleKeys counts the keys of at most max records in [from, to)
// (diagnose.Log). Transaction markers are skipped; batches that do not
// decode are skipped too.
func (l lagLog) SampleKeys(ctx context.Context, topic string, partition int32, from, to int64, max int) (map[string]int, int, error) {
	p, err := l.e.Partition(topic, partition)
	if err != nil {
		return nil, 0, err
	}
	counts := map[string]int{}
	n, lo := 0, from
	for from < to && n < max {
		rr, err := p.Read(ctx, from, 1<<20, true)
		if err != nil {
			return counts, n, err
		}
		b := rr.Records
		if len(b) == 0 {
			break
		}
		for len(b) >= batch.HeaderSize && n < max {
			size, err := batch.Size(b)
			if err != nil || size > len(b) {
				return counts, n, nil
			}
			bt := b[:size]
			b = b[size:]
			from = batch.LastOffset(bt) + 1
			if batch.Attributes(bt)&batch.AttrControl != 0 {
				continue
			}
			x, err := p.DecodeRecords(ctx, bt)
			if err != nil {
				continue
			}
			base := batch.BaseOffset(bt)
			for _, r := range x.Records {
				if off := base + int64(r.OffsetDelta); off >= lo && off < to && n < max {
					counts[string(r.Key)]++
					n++
				}
			}
			x.Release()
		}
	}
	return counts, n, nil
}

// OffsetForTime is the first offset with a timestamp at or after ts, -1
// when none (trace.Log).
func (l lagLog) OffsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	p, err := l.e.Partition(topic, partition)
	if err != nil {
		return -1, err
	}
	off, _, err := p.OffsetForTimestamp(ctx, ts)
	return off, err
}

// Read returns whole batches from the one holding offset (trace.Log).
func (l lagLog) Read(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) ([]byte, error) {
	p, err := l.e.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	rr, err := p.Read(ctx, offset, maxBytes, true)
	return rr.Records, err
}

// Decode decodes one batch of the partition (trace.Log).
func (l lagLog) Decode(ctx context.Context, topic string, partition int32, b []byte) (*batch.Decoded, error) {
	p, err := l.e.Partition(topic, partition)
	if err != nil {
		return nil, err
	}
	return p.DecodeRecords(ctx, b)
}

// brokerFacts tells diagnose about this broker.
type brokerFacts struct {
	node    int32
	e       *log.Engine
	budget  int64
	traffic *observe.Metrics
	leads   func(topic string, partition int32) bool
}

func (f brokerFacts) BrokerFacts() diagnose.BrokerFacts {
	sp := f.e.Space()
	segs, bytes, limit := f.e.RollBacklog()
	facts := diagnose.BrokerFacts{NodeID: f.node, FreeBytes: sp.FreeBytes, MinFreeBytes: sp.MinFreeBytes, Refusing: sp.Refusing,
		RefusedProduce: sp.Refused, RefusedInternal: sp.RefusedInternal, RollSegments: segs, RollBytes: bytes, RollSegmentLimit: limit,
		RSSBytes: residentBytes(), BudgetBytes: f.budget, At: time.Now()}
	if f.traffic != nil {
		t := f.traffic.Totals()
		facts.ProducedRecords, facts.ProducedBytes, facts.FetchedRecords, facts.FetchedBytes = t.ProducedRecords, t.ProducedBytes, t.FetchedRecords, t.FetchedBytes
	}
	f.e.EachTopic(func(t log.TopicPartitions) {
		for i := range t.Partitions {
			if f.leads == nil || f.leads(t.Name, int32(i)) {
				facts.Partitions++
			}
		}
	})
	return facts
}

// residentBytes is this process's resident set (VmRSS), 0 if unknown.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// ListGroups lists every group the coordinator serves (catalog.GroupLister).
func (l *lagGroups) ListGroups() ([]catalog.Group, error) {
	listed, err := l.c.List()
	if err != nil {
		return nil, err
	}
	out := make([]catalog.Group, 0, len(listed))
	for _, g := range listed {
		out = append(out, catalog.Group{Group: g.Group, Type: g.Type, ProtocolType: g.ProtocolType, State: g.State})
	}
	return out, nil
}

// CommitOffsets commits offsets for a group without members
// (catalog.OffsetWriter): the coordinator refuses it while members are
// active, as Kafka does for --reset-offsets.
func (l *lagGroups) CommitOffsets(ctx context.Context, g, topic string, offsets map[int32]int64) error {
	r := group.CommitRequest{Group: g, Generation: -1, RetentionMs: -1, Version: 8}
	for p, o := range offsets {
		r.Partitions = append(r.Partitions, group.CommitPartition{Topic: topic, Partition: p, Offset: o, LeaderEpoch: -1})
	}
	select {
	case errs := <-l.c.Commit(ctx, r):
		for i, err := range errs {
			if err != nil {
				return fmt.Errorf("partition %d: %w (stop the group's consumers first)", r.Partitions[i].Partition, err)
			}
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Committed is the group's committed offsets of topic (catalog.OffsetWriter).
func (l *lagGroups) Committed(g, topic string) (map[int32]int64, error) {
	offs, err := l.c.FetchOffsets(g, nil)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, o := range offs {
		if o.Topic == topic {
			out[o.Partition] = o.Offset
		}
	}
	return out, nil
}

// Coordinates reports whether this broker coordinates g.
func (l *lagGroups) Coordinates(g string) bool {
	_, err := l.c.FetchOffsets(g, nil)
	return !errors.Is(err, group.ErrNotCoordinator)
}

// TopicNames lists the topics (deadletter.Topics).
func (l lagLog) TopicNames() []string {
	ts := l.e.Topics()
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}
