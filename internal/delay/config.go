package delay

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Topic is the internal topic holding pending records.
const Topic = "__sluice_delay"

// ProducerIDBase is the first of the producer ids the delay service
// delivers with: store partition i uses ProducerIDBase+i, epoch 0. The
// engine hands out producer ids counting up from 0, so this range is never
// reached by a client's.
const ProducerIDBase = math.MaxInt64 - 1<<20

// Config is the delay service's configuration.
type Config struct {
	// Partitions is the store's partition count when it is created
	// (default 8); an existing store keeps its own.
	Partitions int32
	// MaxDelay is the longest delay taken (default 90 days).
	MaxDelay time.Duration
	// Tick is the timing wheel's finest tick (default 10 ms): no record is
	// delivered early, and a record is late by about a tick plus the
	// delivery's own time.
	Tick time.Duration
	// Horizon: entries due within it are indexed in memory; later ones stay
	// in the log only, found by a scan as their time nears (default 10 min).
	Horizon time.Duration
	// MemoryEntries bounds the entries indexed in memory per store
	// partition (default 250,000): past it the horizon shrinks.
	MemoryEntries int
	// BatchRecords bounds the records of one delivery batch (default 5,000;
	// a batch also stays under 900 KiB).
	BatchRecords int
	// StoreMinCompactionLag is the store topic's min.compaction.lag.ms:
	// entries younger than this are left out of its compaction, so that a
	// burst of held records is not rewritten while it arrives; delivered
	// entries and their tombstones go once they are this old (default 1 h;
	// 0: the broker's default).
	StoreMinCompactionLag time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// DefaultConfig is the configuration sluice serve uses.
func DefaultConfig() Config {
	return Config{Partitions: 8, MaxDelay: 90 * 24 * time.Hour, Tick: 10 * time.Millisecond,
		Horizon: 10 * time.Minute, MemoryEntries: 250_000, BatchRecords: 5000, StoreMinCompactionLag: time.Hour}
}

// ErrConfig is an invalid Config.
var ErrConfig = errors.New("delay: invalid config")

// Validate checks c, naming the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > 1<<20:
		return fmt.Errorf("%w: Partitions %d", ErrConfig, c.Partitions)
	case c.MaxDelay < 90*24*time.Hour:
		return fmt.Errorf("%w: MaxDelay %s is under 90 days", ErrConfig, c.MaxDelay)
	case c.Tick < time.Millisecond:
		return fmt.Errorf("%w: Tick %s", ErrConfig, c.Tick)
	case c.Horizon < time.Second:
		return fmt.Errorf("%w: Horizon %s", ErrConfig, c.Horizon)
	case c.MemoryEntries < 100:
		return fmt.Errorf("%w: MemoryEntries %d", ErrConfig, c.MemoryEntries)
	case c.BatchRecords < 1:
		return fmt.Errorf("%w: BatchRecords %d", ErrConfig, c.BatchRecords)
	case c.StoreMinCompactionLag < 0:
		return fmt.Errorf("%w: StoreMinCompactionLag %s", ErrConfig, c.StoreMinCompactionLag)
	}
	return nil
}
