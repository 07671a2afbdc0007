package txn

import (
	"context"
	"errors"

	"github.com/sluice-mq/sluice/internal/log"
)

// Topic is the internal topic holding transaction state.
const Topic = "__transaction_state"

// Store is the transaction state topic as the coordinator needs it: the
// log engine in production (NewEngineStore), memory in tests.
type Store interface {
	// Partitions is the topic's partition count, 0 when it does not exist.
	Partitions() int32
	// Create creates the compacted topic with n partitions, or returns the
	// partition count it already has.
	Create(ctx context.Context, n int32) (int32, error)
	// Append appends one batch to partition p and returns its base offset
	// once the high watermark has passed it (acks=all).
	Append(ctx context.Context, p int32, batch []byte) (int64, error)
	// Read returns whole batches from the one holding offset, and the high
	// watermark at the time of the read.
	Read(ctx context.Context, p int32, offset int64) ([]byte, int64, error)
}

// MarkerWriter writes a transaction marker (a control batch) to one
// partition and returns once it is durable.
type MarkerWriter interface {
	WriteMarker(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error
}

// Groups is the group coordinator as transactions need it.
type Groups interface {
	// Partition is the __consumer_offsets partition of a group.
	Partition(group string) int32
	// EnsureTopic creates __consumer_offsets if needed.
	EnsureTopic(ctx context.Context) error
	// CompleteTxn applies (commit) or drops the producer's transactional
	// offsets in one __consumer_offsets partition, after its marker.
	CompleteTxn(ctx context.Context, partition int32, pid int64, commit bool) error
}

// NewEngineStore is the Store over the broker's log engine.
func NewEngineStore(e *log.Engine) Store { return log.NewInternalTopic(e, Topic) }

type engineMarkers struct{ e *log.Engine }

// NewEngineMarkers is the MarkerWriter over the log engine
// (Partition.AppendControl).
func NewEngineMarkers(e *log.Engine) MarkerWriter { return engineMarkers{e} }

func (m engineMarkers) WriteMarker(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	p, err := m.e.Partition(topic, partition)
	if errors.Is(err, log.ErrUnknownTopicOrPartition) {
		// Deleted since it joined the transaction: nothing left to mark,
		// as Kafka drops markers for partitions that no longer exist.
		return nil
	}
	if err != nil {
		return err
	}
	_, err = p.AppendControl(ctx, pid, epoch, commit, coordinatorEpoch)
	if errors.Is(err, log.ErrUnknownTopicOrPartition) {
		return nil
	}
	return err
}
