package log

// This file is the contract between the log engine and its callers (the
// broker and protocol front-end). Bodies live in other files of this package.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/log/wal"
)

// Sentinel errors. The protocol front-end maps each to one Kafka error code.
var (
	ErrUnknownTopicOrPartition = errors.New("log: unknown topic or partition") // UNKNOWN_TOPIC_OR_PARTITION
	ErrTopicExists             = errors.New("log: topic already exists")       // TOPIC_ALREADY_EXISTS
	ErrTopicCollision          = errors.New("log: topic name collides")        // INVALID_TOPIC_EXCEPTION
	ErrInvalidPartitions       = errors.New("log: invalid partition count")    // INVALID_PARTITIONS
	ErrCorruptMessage          = errors.New("log: corrupt record batch")       // CORRUPT_MESSAGE
	ErrMessageTooLarge         = errors.New("log: record batch too large")     // MESSAGE_TOO_LARGE
	ErrRecordListTooLarge      = errors.New("log: record list too large")      // RECORD_LIST_TOO_LARGE
	ErrInvalidRecord           = errors.New("log: invalid record")             // INVALID_RECORD
	ErrInvalidTimestamp        = errors.New("log: invalid timestamp")          // INVALID_TIMESTAMP
	ErrUnsupportedMagic        = errors.New("log: unsupported message format") // UNSUPPORTED_FOR_MESSAGE_FORMAT
	ErrOffsetOutOfRange        = errors.New("log: offset out of range")        // OFFSET_OUT_OF_RANGE
	ErrStorage                 = errors.New("log: storage error")              // KAFKA_STORAGE_ERROR
	ErrClosed                  = errors.New("log: engine closed")              // NOT_LEADER_OR_FOLLOWER (retriable)
	// ErrDelayed: under Config.DetectDelay, a valid payload holding records
	// with a delayed-delivery header; the caller hands it to internal/delay.
	ErrDelayed = errors.New("log: records carry a delayed-delivery header")
	// ErrLegacyCodec: records a legacy (magic 0/1) reader was to get are
	// compressed with zstd, which those formats cannot carry
	// (UNSUPPORTED_COMPRESSION_TYPE).
	ErrLegacyCodec = errors.New("log: compression codec has no legacy message format")

	// Idempotent producer state (Kafka's ProducerAppendInfo checks).
	ErrOutOfOrderSequence   = errors.New("log: out of order sequence number") // OUT_OF_ORDER_SEQUENCE_NUMBER
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")       // INVALID_PRODUCER_EPOCH
)

// FlushMode says when the WAL is fsynced.
type FlushMode int

const (
	// FlushEveryBatch: every group-commit flush is fsynced (durable default).
	FlushEveryBatch FlushMode = iota
	// FlushMessages: fsync once FlushMessages records are unsynced.
	FlushMessages
	// FlushInterval: fsync every FlushInterval.
	FlushInterval
	// FlushOS: never fsync explicitly; the OS writes back page cache.
	FlushOS
)

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// ReplicationFactor is the factor the topic was created with (at
	// least 1). Data is as durable as the storage layer whatever it is;
	// it sets how many brokers Metadata lists as replicas.
	ReplicationFactor int16
	Configs           map[string]string // overrides only
	Internal          bool
	// Assignments are the replica lists given for partitions, by
	// partition, at creation or by a reassignment; the first live broker
	// of a list is the partition's preferred leader. Shared: not to be
	// modified.
	Assignments map[int32][]int32
}

// AppendResult is the outcome of a successful Append.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64

	// loadSeq is the partition's incarnation the batch was appended in
	// (or, for a duplicate, the original was): WaitDurable checks it.
	loadSeq uint64
	// g is the WAL group holding the batch (nil for a duplicate).
	g *wal.Group
}

// Duplicate reports whether the append was an idempotent producer's retry
// of a batch already in the log: nothing was appended, and BaseOffset is
// the original's.
func (r AppendResult) Duplicate() bool { return r.g == nil }

// WaitWritten blocks until the WAL group holding r's batch is written (not
// yet synced): what Append with acks 1 waits for. After AppendAsync it lets
// one goroutine place many partitions' batches in one group and then wait
// for that group once. A duplicate (no group) returns at once.
func (r AppendResult) WaitWritten(ctx context.Context) error {
	if r.g == nil {
		return nil
	}
	select {
	case <-r.g.Written():
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := r.g.WriteErr(); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

// ReadResult is what Read returns.
type ReadResult struct {
	// Records holds whole v2 record batches, as stored, starting with the
	// batch that contains the requested offset.
	Records          []byte
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// RecoveryReport says what Open found and did.
type RecoveryReport struct {
	WALSegments      int
	WALBytesReplayed int64
	TruncatedBytes   int64 // torn or corrupt tail bytes dropped
	TruncatedFiles   []string
	Partitions       int
	Duration         time.Duration
}
