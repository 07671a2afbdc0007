package group

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by Config.Validate errors.
var ErrInvalidConfig = errors.New("group: invalid configuration")

// Config configures the coordinator. Names in comments are Kafka's.
type Config struct {
	// OffsetsTopicPartitions is the partition count used when the offsets
	// topic is created (offsets.topic.num.partitions). An existing topic
	// keeps its count.
	OffsetsTopicPartitions int32
	// OffsetsRetention is how long offsets of an empty group are kept
	// (offsets.retention.minutes).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is how often expiry runs
	// (offsets.retention.check.interval.ms).
	OffsetsRetentionCheckInterval time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members (group.initial.rebalance.delay.ms).
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for (group.min/max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxSize is the most members a group may have; 0 is unlimited
	// (group.max.size).
	MaxSize int
	// MaxMetadataBytes bounds the metadata of one committed offset
	// (offset.metadata.max.bytes).
	MaxMetadataBytes int
	// ConsumerSessionTimeout is how long a KIP-848 member may go without a
	// heartbeat (group.consumer.session.timeout.ms).
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is the interval KIP-848 members are told to
	// heartbeat at (group.consumer.heartbeat.interval.ms).
	ConsumerHeartbeatInterval time.Duration
	// ExplicitOwnership is cluster mode: the coordinator owns no partition
	// of the offsets topic, and Start loads nothing, until OwnPartition is
	// called for it (this broker became the partition's leader). False is a
	// single node: Start loads every partition and owns them all.
	ExplicitOwnership bool
	// Claimed, in cluster mode, reports whether this broker has taken the
	// leadership of partition p but not called OwnPartition yet (the
	// partition's log is still loading). Requests for its groups then answer
	// ErrLoading (COORDINATOR_LOAD_IN_PROGRESS), as Kafka does while it
	// loads, instead of ErrNotCoordinator. Nil: never.
	Claimed func(p int32) bool
	// Observer, when set, hears of every offset commit once it is durable
	// (and of transactional offsets once their transaction commits): the
	// lag tracker's window of commits. Nil: nobody listens.
	Observer CommitObserver
	// OnRebalance, when set, hears of every rebalance: a classic group's
	// new generation, a consumer group's (KIP-848) new group epoch. It
	// runs with the group's lock held and must be quick. Nil: nobody.
	OnRebalance func(group string)
}

// CommitObserver hears of committed offsets. Committed is called with the
// group's lock held: it must be quick and must not call the coordinator.
type CommitObserver interface {
	Committed(group string, offsets []ObservedCommit)
}

// ObservedCommit is one partition's newly committed offset.
type ObservedCommit struct {
	Topic     string
	Partition int32
	Offset    int64
	// CommitTime is when the coordinator accepted it, Unix milliseconds.
	CommitTime int64
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		OffsetsTopicPartitions:        50,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		InitialRebalanceDelay:         3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		MaxSize:                       0,
		MaxMetadataBytes:              4096,
		ConsumerSessionTimeout:        45 * time.Second,
		ConsumerHeartbeatInterval:     5 * time.Second,
	}
}

// Validate reports a bad configuration, naming the field.
func (c *Config) Validate() error {
	bad := func(k, f string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, k, fmt.Sprintf(f, a...))
	}
	switch {
	case c.OffsetsTopicPartitions < 1 || c.OffsetsTopicPartitions > 10000:
		return bad("offsets_topic_partitions", "must be 1..10000, got %d", c.OffsetsTopicPartitions)
	case c.OffsetsRetention <= 0:
		return bad("offsets_retention", "must be > 0")
	case c.OffsetsRetentionCheckInterval <= 0:
		return bad("offsets_retention_check_interval", "must be > 0")
	case c.InitialRebalanceDelay < 0:
		return bad("initial_rebalance_delay", "must be >= 0")
	case c.MinSessionTimeout <= 0:
		return bad("min_session_timeout", "must be > 0")
	case c.MaxSessionTimeout < c.MinSessionTimeout:
		return bad("max_session_timeout", "must be >= min_session_timeout (%v)", c.MinSessionTimeout)
	case c.MaxSize < 0:
		return bad("max_size", "must be >= 0")
	case c.MaxMetadataBytes < 0:
		return bad("max_metadata_bytes", "must be >= 0")
	case c.ConsumerHeartbeatInterval <= 0:
		return bad("consumer_heartbeat_interval", "must be > 0")
	case c.ConsumerSessionTimeout <= c.ConsumerHeartbeatInterval:
		return bad("consumer_session_timeout", "must be > consumer_heartbeat_interval (%v)", c.ConsumerHeartbeatInterval)
	}
	return nil
}
