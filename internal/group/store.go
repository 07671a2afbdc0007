package group

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/internal/log"
)

// Topic is the internal topic holding group metadata and offsets.
const Topic = "__consumer_offsets"

// Store is the offsets topic as the coordinator needs it. The production
// implementation is the log engine (NewEngineStore); tests use a memory one.
type Store interface {
	// Partitions is the topic's partition count, 0 when it does not exist.
	Partitions() int32
	// Create creates the compacted topic with n partitions. If it exists
	// already its partition count is returned unchanged.
	Create(ctx context.Context, n int32) (int32, error)
	// Append appends one record batch to partition p and returns its base
	// offset once the high watermark has passed it (acks=all).
	Append(ctx context.Context, p int32, batch []byte) (int64, error)
	// Read returns whole batches starting with the one holding offset, and
	// the high watermark at the time of the read.
	Read(ctx context.Context, p int32, offset int64) ([]byte, int64, error)
}

type engineStore struct {
	e  *log.Engine
	mu sync.Mutex // serialises Create
}

// NewEngineStore is the Store over the broker's log engine.
func NewEngineStore(e *log.Engine) Store { return &engineStore{e: e} }

// ListTopics lists the engine's topics for consumer-protocol assignors.
func (s *engineStore) ListTopics() []TopicMeta {
	ts := s.e.Topics()
	out := make([]TopicMeta, 0, len(ts))
	for _, t := range ts {
		out = append(out, TopicMeta{Name: t.Name, ID: t.ID, Partitions: t.Partitions})
	}
	return out
}

func (s *engineStore) Partitions() int32 {
	if t, ok := s.e.Topic(Topic); ok {
		return t.Partitions
	}
	return 0
}

func (s *engineStore) Create(ctx context.Context, n int32) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.e.Topic(Topic); ok {
		return t.Partitions, nil
	}
	t, err := s.e.CreateTopic(ctx, Topic, n, map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
	})
	if errors.Is(err, log.ErrTopicExists) {
		if t, ok := s.e.Topic(Topic); ok {
			return t.Partitions, nil
		}
	}
	if err != nil {
		return 0, err
	}
	return t.Partitions, nil
}

func (s *engineStore) Append(ctx context.Context, p int32, batch []byte) (int64, error) {
	part, err := s.e.Partition(Topic, p)
	if err != nil {
		return 0, err
	}
	res, err := part.Append(ctx, batch, -1)
	if err != nil {
		return 0, err
	}
	last := res.BaseOffset + int64(recordCount(batch)) - 1
	for {
		ch := part.Wait()
		if part.HighWatermark() > last {
			return res.BaseOffset, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (s *engineStore) Read(ctx context.Context, p int32, offset int64) ([]byte, int64, error) {
	part, err := s.e.Partition(Topic, p)
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
		return nil, 0, fmt.Errorf("reading %s-%d at %d: %w", Topic, p, offset, err)
	}
	return r.Records, r.HighWatermark, nil
}
