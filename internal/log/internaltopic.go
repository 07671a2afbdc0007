package log

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unicode/utf16"
)

// InternalTopic is a compacted internal topic as a coordinator uses it
// (__consumer_offsets for groups, __transaction_state for transactions):
// created on first use, appended to with acks=all, read back whole batches
// at a time on load. The group and transaction coordinators share it; each
// keeps its own small Store interface so tests can use memory instead.
type InternalTopic struct {
	e    *Engine
	name string
	mu   sync.Mutex // serialises Create
	// Configs are topic configs Create sets besides the compaction
	// policy (set before the first Create).
	Configs map[string]string
}

// NewInternalTopic returns the internal topic name over e.
func NewInternalTopic(e *Engine, name string) *InternalTopic {
	return &InternalTopic{e: e, name: name}
}

// Partitions is the topic's partition count, 0 when it does not exist.
func (s *InternalTopic) Partitions() int32 {
	if t, ok := s.e.Topic(s.name); ok {
		return t.Partitions
	}
	return 0
}

// Create creates the compacted topic with n partitions; if it exists
// already its partition count is returned unchanged.
func (s *InternalTopic) Create(ctx context.Context, n int32) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.e.Topic(s.name); ok {
		return t.Partitions, nil
	}
	cfg := map[string]string{"cleanup.policy": "compact", "compression.type": "producer"}
	for k, v := range s.Configs {
		cfg[k] = v
	}
	t, err := s.e.CreateTopic(ctx, s.name, n, cfg)
	if errors.Is(err, ErrTopicExists) {
		// Created by another broker at the same moment: its record may not
		// have reached our topic watch yet, so read it.
		if _, ok := s.e.Topic(s.name); !ok {
			if rerr := s.e.refreshTopic(ctx, s.name); rerr != nil {
				return 0, rerr
			}
		}
		if t, ok := s.e.Topic(s.name); ok {
			return t.Partitions, nil
		}
	}
	if err != nil {
		return 0, err
	}
	return t.Partitions, nil
}

// Append appends one batch to partition p and returns its base offset once
// it is durable. An acks=all Append returns only after the WAL writer has
// advanced the high watermark past the batch (OnDurable runs before the
// group's Durable channel closes), so no extra wait is needed. These
// writes are small and let consumers record progress, so they go on under
// the free-space guard that refuses produce (Config.MinFreeBytes), down to
// its hard floor.
func (s *InternalTopic) Append(ctx context.Context, p int32, batch []byte) (int64, error) {
	part, err := s.e.Partition(s.name, p)
	if err != nil {
		return 0, err
	}
	res, err := part.append(ctx, batch, untilDurable, appendInternal)
	if err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// Read returns whole batches starting with the one holding offset (or the
// log start, if offset is below it), and the high watermark at the time of
// the read.
func (s *InternalTopic) Read(ctx context.Context, p int32, offset int64) ([]byte, int64, error) {
	part, err := s.e.Partition(s.name, p)
	if err != nil {
		return nil, 0, err
	}
	if ls := part.LogStartOffset(); offset < ls {
		offset = ls
	}
	hw := part.HighWatermark()
	if offset >= hw {
		return nil, hw, nil
	}
	r, err := part.Read(ctx, offset, 1<<20, true)
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s-%d at %d: %w", s.name, p, offset, err)
	}
	return r.Records, r.HighWatermark, nil
}

// CoordinatorPartition is Kafka's mapping of a group or transactional id to
// a partition of its internal topic: Utils.abs(id.hashCode) % n, where
// hashCode is Java's String.hashCode over UTF-16 code units.
func CoordinatorPartition(id string, n int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(id)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}
