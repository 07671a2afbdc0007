package txn

import (
	"fmt"
	"time"
)

// Config is the coordinator's configuration, after Kafka's transaction.*
// broker settings.
type Config struct {
	// Partitions of __transaction_state (transaction.state.log.num.partitions).
	Partitions int32
	// MaxTimeout caps a client's transaction.timeout.ms
	// (transaction.max.timeout.ms); longer asks are INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// AbortCheckInterval is how often timed-out transactions are looked for
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortCheckInterval time.Duration
	// ExplicitOwnership is cluster mode: the coordinator owns no partition
	// of the state topic, and Start loads nothing, until OwnPartition is
	// called for it (this broker became the partition's leader). False is a
	// single node: Start loads every partition and owns them all.
	ExplicitOwnership bool
	// Claimed, in cluster mode, reports whether this broker has taken the
	// leadership of partition p but not called OwnPartition yet (the
	// partition's log is still loading). Requests for its transactional ids then answer
	// ErrLoading (COORDINATOR_LOAD_IN_PROGRESS), as Kafka does while it
	// loads, instead of ErrNotCoordinator. Nil: never.
	Claimed func(p int32) bool
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{Partitions: 50, MaxTimeout: 15 * time.Minute, AbortCheckInterval: 10 * time.Second}
}

// Validate names the first bad key.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("transactions.state_topic_partitions must be at least 1, not %d", c.Partitions)
	case c.MaxTimeout < time.Millisecond:
		return fmt.Errorf("transactions.max_timeout must be at least 1ms, not %v", c.MaxTimeout)
	case c.AbortCheckInterval <= 0:
		return fmt.Errorf("transactions.abort_check_interval must be positive, not %v", c.AbortCheckInterval)
	}
	return nil
}
