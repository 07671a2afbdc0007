package log

import (
	"sort"
	"sync/atomic"
)

// Traffic counts one partition's client traffic since the broker started,
// for the per-topic and per-partition metrics (internal/observe). The
// Kafka front-end adds to it on the produce and fetch paths; the log never
// reads it. Counters only grow while the handle lives.
type Traffic struct {
	ProducedRecords, ProducedBytes atomic.Int64
	FetchedRecords, FetchedBytes   atomic.Int64
}

// Traffic returns the partition's traffic counters, allocated on first
// use: a partition nobody produces to or fetches from carries only a nil
// pointer.
func (p *Partition) Traffic() *Traffic {
	if t := p.traffic.Load(); t != nil {
		return t
	}
	p.traffic.CompareAndSwap(nil, &Traffic{})
	return p.traffic.Load()
}

// TrafficIfAny returns the partition's traffic counters, nil when it has
// seen no traffic yet.
func (p *Partition) TrafficIfAny() *Traffic { return p.traffic.Load() }

// RetainedOffsets is the span of offsets the partition holds: the high
// watermark minus the log start offset. It counts records, plus the
// offsets of transaction markers and of records compaction removed.
func (p *Partition) RetainedOffsets() int64 {
	return max(p.hw.Load()-p.logStart.Load(), 0)
}

// TopicPartitions is one topic with its partition handles, as
// EachTopic lists them.
type TopicPartitions struct {
	Name       string
	Internal   bool
	Partitions []*Partition // shared: do not modify
}

// EachTopic calls fn for every topic, sorted by name, with its partition
// handles. It holds no lock while fn runs: a topic deleted meanwhile is
// still listed (its handles answer ErrUnknownTopicOrPartition).
func (e *Engine) EachTopic(fn func(TopicPartitions)) {
	e.mu.RLock()
	ts := make([]*topic, 0, len(e.topics))
	for _, t := range e.topics {
		ts = append(ts, t)
	}
	e.mu.RUnlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	for _, t := range ts {
		fn(TopicPartitions{Name: t.name, Internal: t.internal, Partitions: t.partitions()})
	}
}
