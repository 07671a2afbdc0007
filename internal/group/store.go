package group

import (
	"context"

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

// engineStore is the shared internal-topic store plus the topic listing the
// consumer-protocol assignors need.
type engineStore struct {
	*log.InternalTopic
	e *log.Engine
}

// NewEngineStore is the Store over the broker's log engine.
func NewEngineStore(e *log.Engine) Store {
	return &engineStore{InternalTopic: log.NewInternalTopic(e, Topic), e: e}
}

// TopicExists reads the topic's record from the metadata store
// (TopicChecker).
func (s *engineStore) TopicExists(ctx context.Context, name string) (bool, error) {
	return s.e.TopicExists(ctx, name)
}

// ListTopics lists the engine's topics for consumer-protocol assignors.
func (s *engineStore) ListTopics() []TopicMeta {
	ts := s.e.Topics()
	out := make([]TopicMeta, 0, len(ts))
	for _, t := range ts {
		out = append(out, TopicMeta{Name: t.Name, ID: t.ID, Partitions: t.Partitions})
	}
	return out
}
