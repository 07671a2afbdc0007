package config

import (
	"regexp"
	"time"
)

// The sections of the capabilities around the log: delayed delivery, lag
// verdicts, metrics, lineage, the schema registry and topic governance.

// Delay configures delayed delivery (docs/delayed-delivery.md).
type Delay struct {
	// Enabled takes the sluice-deliver-at and sluice-delay-ms headers; off,
	// they are ordinary headers.
	Enabled bool `yaml:"enabled"`
	// StorePartitions is the partition count of __sluice_delay when it is
	// created.
	StorePartitions int32 `yaml:"store_partitions"`
	// MaxDelay is the longest delay taken (at least 90 days).
	MaxDelay time.Duration `yaml:"max_delay"`
	// Horizon: pending records due within it are indexed in memory.
	Horizon time.Duration `yaml:"horizon"`
	// MemoryEntries bounds the records indexed in memory per store partition.
	MemoryEntries int `yaml:"memory_entries"`
	// StoreMinCompactionLag is the min.compaction.lag.ms of the store
	// topic: held records younger than this are not rewritten by its
	// compaction (default 1h; 0: the broker's default).
	StoreMinCompactionLag time.Duration `yaml:"store_min_compaction_lag"`
}

// Lag configures the lag verdicts (internal/lag, docs/lag.md).
type Lag struct {
	// Window is how many commits per group and partition the verdict is
	// made from.
	Window int `yaml:"window"`
	// MinDistance is the least time between two commits kept in a window.
	MinDistance time.Duration `yaml:"min_distance"`
	// StoppedAfter is the least time without commits, with lag, for a
	// partition to be STOPPED.
	StoppedAfter time.Duration `yaml:"stopped_after"`
	// MaxPartitions bounds the windows kept (groups x partitions).
	MaxPartitions int `yaml:"max_partitions"`
}

// Metrics configures what /metrics exports beyond the broker-wide
// series (internal/observe, docs/metrics.md).
type Metrics struct {
	// PerTopic counts produce and fetch traffic per partition and exports
	// the per-topic, per-partition and per-group series.
	PerTopic bool `yaml:"per_topic"`
	// TopPartitions is how many partitions get series of their own: the
	// busiest by traffic since the previous scrape, and, per group, the
	// ones with the most lag. 0: none.
	TopPartitions int `yaml:"top_partitions"`
}

// Lineage configures the lineage recorder (internal/lineage, docs/lineage.md).
type Lineage struct {
	// Enabled records relations; off, the recorder is never called and
	// `sluice lineage` shows what was recorded before.
	Enabled bool `yaml:"enabled"`
	// FlushInterval is how often new relations are written to the
	// metadata store (where other brokers and restarts see them).
	FlushInterval time.Duration `yaml:"flush_interval"`
	// MaxEdges bounds the relations kept.
	MaxEdges int `yaml:"max_edges"`
}

// SchemaRegistry configures the Confluent-compatible schema registry
// (internal/registry, docs/schema-registry.md).
type SchemaRegistry struct {
	// Listen is the registry's HTTP address; empty turns it off.
	Listen string `yaml:"listen"`
}

// DefaultSchemaRegistryListen is the registry's default address:
// Confluent's port, on the loopback interface only.
const DefaultSchemaRegistryListen = "127.0.0.1:8081"

// Governance holds topic policies (docs/governance.md).
type Governance struct {
	// TopicNamePattern is a regular expression (RE2, anchored by the
	// writer) every new topic's name must match; empty: any name. The
	// documented example is {domain}.{event}.v{N}:
	// ^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*\.v[0-9]+$
	TopicNamePattern string `yaml:"topic_name_pattern"`
	// SchemaRequired are regular expressions (RE2, unanchored: anchor
	// them) of topic names whose records must carry a registered schema:
	// a matching topic's sluice.value.schema.validation defaults to true
	// (an explicit false on the topic still turns it off). It holds for
	// topics however created and for those that exist already; internal
	// topics never match. Empty: no topic requires one.
	SchemaRequired []string `yaml:"schema_required"`
}

// validateFeatures checks the sections above.
func (c *Config) validateFeatures(bad func(key, format string, args ...any) error) error {
	if p := c.Governance.TopicNamePattern; p != "" {
		if _, err := regexp.Compile(p); err != nil {
			return bad("governance.topic_name_pattern", "%q is not a regular expression: %v", p, err)
		}
	}
	for _, p := range c.Governance.SchemaRequired {
		if _, err := regexp.Compile(p); err != nil {
			return bad("governance.schema_required", "%q is not a regular expression: %v", p, err)
		}
	}
	switch l := c.Lineage; {
	case l.FlushInterval < 100*time.Millisecond:
		return bad("lineage.flush_interval", "must be >= 100ms, got %s", l.FlushInterval)
	case l.MaxEdges < 1:
		return bad("lineage.max_edges", "must be >= 1")
	}
	switch l := c.Lag; {
	case l.Window < 2 || l.Window > 1000:
		return bad("lag.window", "must be 2..1000, got %d", l.Window)
	case l.MinDistance < 0:
		return bad("lag.min_distance", "must be >= 0")
	case l.StoppedAfter < time.Second:
		return bad("lag.stopped_after", "must be >= 1s")
	case l.MaxPartitions < 1:
		return bad("lag.max_partitions", "must be >= 1")
	}
	if n := c.Metrics.TopPartitions; n < 0 || n > 10000 {
		return bad("metrics.top_partitions", "must be 0..10000, got %d", n)
	}
	switch d := c.Delay; {
	case d.StorePartitions < 1 || d.StorePartitions > 10000:
		return bad("delay.store_partitions", "must be 1..10000, got %d", d.StorePartitions)
	case d.MaxDelay < 90*24*time.Hour:
		return bad("delay.max_delay", "must be at least 90 days (2160h), got %s", d.MaxDelay)
	case d.Horizon < time.Second:
		return bad("delay.horizon", "must be >= 1s")
	case d.MemoryEntries < 100:
		return bad("delay.memory_entries", "must be >= 100")
	case d.StoreMinCompactionLag < 0:
		return bad("delay.store_min_compaction_lag", "must be >= 0, got %s", d.StoreMinCompactionLag)
	}
	return nil
}
