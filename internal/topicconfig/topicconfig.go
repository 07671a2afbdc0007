// Package topicconfig defines the topic-level configuration keys sluice
// understands (Kafka's names, types and defaults), validates them, and parses
// a topic's overrides into a typed Config. It owns no state: the log engine
// stores the overrides, the protocol front-end describes them.
package topicconfig

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every validation error; the front-end maps it to
// INVALID_CONFIG.
var ErrInvalid = errors.New("invalid config")

// Type is a config value's type, as DescribeConfigs v3+ reports it.
type Type int8

// Values match Kafka's ConfigType enum in DescribeConfigs responses.
const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// Def describes one topic config key.
type Def struct {
	Name    string
	Type    Type
	Default string
	Doc     string
	// Check validates a value already known to parse as Type; nil accepts all.
	Check func(string) error
	// BrokerKey is the broker-level key that supplies the default (Kafka's
	// "log.retention.ms" for "retention.ms"), or "".
	BrokerKey string
}

// strategyPrefix is the package of Confluent's subject name strategies;
// strategies are the values the strategy configs take (the same list as
// schemacheck.StrategyValues).
const strategyPrefix = "io.confluent.kafka.serializers.subject."

var strategies = []string{
	strategyPrefix + "TopicNameStrategy", strategyPrefix + "RecordNameStrategy", strategyPrefix + "TopicRecordNameStrategy",
	"TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy",
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n < min {
			return fmt.Errorf("must be at least %d", min)
		}
		return nil
	}
}

// kafkaVersionRE matches what Kafka's MetadataVersion.fromVersionString
// takes: 0.8.0, 0.10.0.0, 0.10.0-IV1, 2.8, 3.0-IV1, ...
var kafkaVersionRE = regexp.MustCompile(`^[0-3](\.[0-9]+)+(-IV[0-9]+)?$`)

func kafkaVersion(v string) error {
	if !kafkaVersionRE.MatchString(v) {
		return errors.New("must be a Kafka version such as 2.8 or 3.0-IV1")
	}
	return nil
}

// between accepts lo..hi, and also any of extra.
func between(lo, hi int64, extra ...int64) func(string) error {
	return func(v string) error {
		n, _ := strconv.ParseInt(v, 10, 64)
		if (n < lo || n > hi) && !slices.Contains(extra, n) {
			if len(extra) > 0 {
				return fmt.Errorf("must be between %d and %d, or one of %v", lo, hi, extra)
			}
			return fmt.Errorf("must be between %d and %d", lo, hi)
		}
		return nil
	}
}

func cleanupPolicy(v string) error {
	if v == "" {
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p != "delete" && p != "compact" {
			return fmt.Errorf("%q is not a valid policy (delete, compact)", p)
		}
	}
	return nil
}

var defs = []Def{
	{Name: "cleanup.policy", Type: TypeList, Default: "delete", Check: cleanupPolicy, BrokerKey: "log.cleanup.policy",
		Doc: "delete: drop old data by retention.ms/retention.bytes; compact: keep the latest value per key."},
	{Name: "compression.type", Type: TypeString, Default: "producer", BrokerKey: "compression.type",
		Check: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		Doc:   "sluice stores batches as the producer sent them; values other than producer are accepted and recorded but do not recompress."},
	{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", Check: between(1, 9, -1), BrokerKey: "compression.gzip.level",
		Doc: "Accepted for compatibility (KIP-390); sluice stores batches as the producer compressed them and does not recompress."},
	{Name: "compression.lz4.level", Type: TypeInt, Default: "9", Check: between(1, 17), BrokerKey: "compression.lz4.level",
		Doc: "Accepted for compatibility (KIP-390); sluice stores batches as the producer compressed them and does not recompress."},
	{Name: "compression.zstd.level", Type: TypeInt, Default: "3", Check: between(-131072, 22), BrokerKey: "compression.zstd.level",
		Doc: "Accepted for compatibility (KIP-390); sluice stores batches as the producer compressed them and does not recompress."},
	{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", Check: atLeast(0), BrokerKey: "log.cleaner.delete.retention.ms",
		Doc: "How long tombstones are kept on compacted topics."},
	{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", Check: atLeast(0), BrokerKey: "log.segment.delete.delay.ms",
		Doc: "Accepted for compatibility; sluice deletes unreferenced objects through its own garbage collector."},
	{Name: "flush.messages", Type: TypeLong, Default: "9223372036854775807", Check: atLeast(1), BrokerKey: "log.flush.interval.messages",
		Doc: "Accepted for compatibility; durability is set broker-wide by the WAL flush policy (flush in the sluice config)."},
	{Name: "flush.ms", Type: TypeLong, Default: "9223372036854775807", Check: atLeast(0), BrokerKey: "log.flush.interval.ms",
		Doc: "Accepted for compatibility; durability is set broker-wide by the WAL flush policy (flush in the sluice config)."},
	{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", Check: atLeast(0), BrokerKey: "log.index.interval.bytes",
		Doc: "Accepted for compatibility; sluice indexes every stored batch."},
	{Name: "max.compaction.lag.ms", Type: TypeLong, Default: "9223372036854775807", Check: atLeast(1), BrokerKey: "log.cleaner.max.compaction.lag.ms",
		Doc: "Longest time a record stays ineligible for compaction on compacted topics."},
	{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", Check: atLeast(0), BrokerKey: "message.max.bytes",
		Doc: "Largest record batch (after compression) the topic accepts."},
	{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", Check: oneOf("CreateTime", "LogAppendTime"), BrokerKey: "log.message.timestamp.type",
		Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's time on append."},
	{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: "9223372036854775807", Check: atLeast(0), BrokerKey: "log.message.timestamp.before.max.ms",
		Doc: "How far in the past a CreateTime timestamp may be; older batches are refused with INVALID_TIMESTAMP."},
	{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "9223372036854775807", Check: atLeast(0), BrokerKey: "log.message.timestamp.after.max.ms",
		Doc: "How far in the future a CreateTime timestamp may be; later batches are refused with INVALID_TIMESTAMP."},
	{Name: "message.timestamp.difference.max.ms", Type: TypeLong, Default: "9223372036854775807", Check: atLeast(0), BrokerKey: "log.message.timestamp.difference.max.ms",
		Doc: "Deprecated by Kafka in favour of message.timestamp.before.max.ms and message.timestamp.after.max.ms; accepted for compatibility."},
	{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", BrokerKey: "log.cleaner.min.cleanable.ratio",
		Doc: "Share of a compacted partition that must be uncompacted before it is compacted again.",
		Check: func(v string) error {
			f, _ := strconv.ParseFloat(v, 64)
			if f < 0 || f > 1 {
				return errors.New("must be between 0 and 1")
			}
			return nil
		}},
	{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", Check: atLeast(0), BrokerKey: "log.cleaner.min.compaction.lag.ms",
		Doc: "Shortest time a record stays uncompacted on compacted topics."},
	{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Check: atLeast(1), BrokerKey: "min.insync.replicas",
		Doc: "Accepted for compatibility; an acks=all write is acknowledged once durable in the storage layer, which replaces in-sync replicas."},
	{Name: "sluice.value.schema.validation", Type: TypeBoolean, Default: "false",
		Doc: "Take only records whose value carries a schema id registered in the broker's schema registry under the subject of sluice.value.subject.name.strategy (default <topic>-value). Defaults to true for topics matching governance.schema_required (docs/schema-registry.md)."},
	{Name: "sluice.key.schema.validation", Type: TypeBoolean, Default: "false",
		Doc: "Take only records whose key carries a schema id registered in the broker's schema registry under the subject of sluice.key.subject.name.strategy (default <topic>-key) (docs/schema-registry.md)."},
	{Name: "sluice.value.schema.validation.decode", Type: TypeBoolean, Default: "false",
		Doc: "Also check that each record's value decodes with the schema its id names (Avro, Protobuf, JSON Schema); turns the value's validation on (docs/schema-registry.md)."},
	{Name: "sluice.key.schema.validation.decode", Type: TypeBoolean, Default: "false",
		Doc: "Also check that each record's key decodes with the schema its id names; turns the key's validation on (docs/schema-registry.md)."},
	{Name: "sluice.value.subject.name.strategy", Type: TypeString, Default: strategyPrefix + "TopicNameStrategy", Check: oneOf(strategies...),
		Doc: "The subject a value's schema id must be registered under, as Confluent's confluent.value.subject.name.strategy: TopicNameStrategy (<topic>-value), RecordNameStrategy (the record name), TopicRecordNameStrategy (<topic>-<record name>), with or without the io.confluent.kafka.serializers.subject. prefix."},
	{Name: "sluice.key.subject.name.strategy", Type: TypeString, Default: strategyPrefix + "TopicNameStrategy", Check: oneOf(strategies...),
		Doc: "The subject a key's schema id must be registered under, as Confluent's confluent.key.subject.name.strategy (values as sluice.value.subject.name.strategy; TopicNameStrategy: <topic>-key)."},
	{Name: "preallocate", Type: TypeBoolean, Default: "false", BrokerKey: "log.preallocate",
		Doc: "Accepted for compatibility; sluice does not preallocate files."},
	{Name: "retention.bytes", Type: TypeLong, Default: "-1", BrokerKey: "log.retention.bytes",
		Doc: "Per-partition size above which the oldest data is deleted; -1 for no limit."},
	{Name: "retention.ms", Type: TypeLong, Default: "604800000", Check: atLeast(-1), BrokerKey: "log.retention.ms",
		Doc: "Age after which data is deleted; -1 for no limit."},
	{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", Check: atLeast(14), BrokerKey: "log.segment.bytes",
		Doc: "Data rolls into objects by the broker's WAL segment size (wal_segment_bytes in the sluice config), shared by all partitions; on a single node, the merge of a partition's small extents makes none larger than this."},
	{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", Check: atLeast(4), BrokerKey: "log.index.size.max.bytes",
		Doc: "Accepted for compatibility; sluice sizes its indexes itself."},
	{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", Check: atLeast(0), BrokerKey: "log.roll.jitter.ms",
		Doc: "Accepted for compatibility; not applied."},
	{Name: "segment.ms", Type: TypeLong, Default: "604800000", Check: atLeast(1), BrokerKey: "log.roll.ms",
		Doc: "Data rolls into objects by the broker's WAL segment size (wal_segment_bytes in the sluice config), shared by all partitions; on a single node, the merge of a partition's small extents makes none spanning more than this."},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", BrokerKey: "unclean.leader.election.enable",
		Doc: "Accepted for compatibility; leadership moves without data loss because every broker reads the same storage."},
	{Name: "message.downconversion.enable", Type: TypeBoolean, Default: "true", BrokerKey: "log.message.downconversion.enable",
		Doc: "Accepted for compatibility; sluice serves only v2 record batches (Fetch v4 and later)."},
	{Name: "message.format.version", Type: TypeString, Default: "3.0-IV1", BrokerKey: "log.message.format.version", Check: kafkaVersion,
		Doc: "Accepted for compatibility (deprecated by Kafka 3.0, which ignores it, and removed in 4.0); sluice stores only v2 record batches."},
	{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "",
		Doc: "Accepted for compatibility; sluice does not replicate between brokers."},
	{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "",
		Doc: "Accepted for compatibility; sluice does not replicate between brokers."},
	{Name: "local.retention.ms", Type: TypeLong, Default: "-2", Check: atLeast(-2), BrokerKey: "log.local.retention.ms",
		Doc: "Accepted for compatibility (Kafka tiered storage); all of sluice's data lives in one storage tier."},
	{Name: "local.retention.bytes", Type: TypeLong, Default: "-2", Check: atLeast(-2), BrokerKey: "log.local.retention.bytes",
		Doc: "Accepted for compatibility (Kafka tiered storage); all of sluice's data lives in one storage tier."},
	{Name: "remote.storage.enable", Type: TypeBoolean, Default: "false",
		Doc: "Accepted for compatibility (Kafka tiered storage); all of sluice's data lives in one storage tier."},
	{Name: "remote.log.copy.disable", Type: TypeBoolean, Default: "false",
		Doc: "Accepted for compatibility (Kafka tiered storage); all of sluice's data lives in one storage tier."},
	{Name: "remote.log.delete.on.disable", Type: TypeBoolean, Default: "false",
		Doc: "Accepted for compatibility (Kafka tiered storage); all of sluice's data lives in one storage tier."},
}

var byName = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for i := range defs {
		m[defs[i].Name] = &defs[i]
	}
	return m
}()

// Defs returns every known topic config, sorted by name.
func Defs() []Def {
	out := append([]Def(nil), defs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the definition of name.
func Lookup(name string) (Def, bool) {
	d, ok := byName[name]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// ValidateValue checks one key/value pair.
func ValidateValue(name, value string) error {
	d, ok := byName[name]
	if !ok {
		return fmt.Errorf("%w: unknown topic config name %q", ErrInvalid, name)
	}
	if err := checkType(d.Type, value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, name, value, err)
	}
	if d.Check != nil {
		if err := d.Check(value); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, name, value, err)
		}
	}
	return nil
}

// Validate checks a set of overrides.
func Validate(overrides map[string]string) error {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ValidateValue(k, overrides[k]); err != nil {
			return err
		}
	}
	return nil
}

func checkType(t Type, v string) error {
	switch t {
	case TypeBoolean:
		if v != "true" && v != "false" {
			return errors.New("not a boolean")
		}
	case TypeInt:
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return errors.New("not a 32-bit integer")
		}
	case TypeShort:
		if _, err := strconv.ParseInt(v, 10, 16); err != nil {
			return errors.New("not a 16-bit integer")
		}
	case TypeLong:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return errors.New("not a 64-bit integer")
		}
	case TypeDouble:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return errors.New("not a number")
		}
	}
	return nil
}

// Config is a topic's effective, typed configuration.
type Config struct {
	Compact              bool  // cleanup.policy contains compact
	Delete               bool  // cleanup.policy contains delete
	RetentionMs          int64 // -1: unlimited
	RetentionBytes       int64 // -1: unlimited
	SegmentBytes         int64
	SegmentMs            int64
	MaxMessageBytes      int32
	LogAppendTime        bool // message.timestamp.type=LogAppendTime
	DeleteRetentionMs    int64
	MinCompactionLagMs   int64
	MaxCompactionLagMs   int64
	MinCleanableRatio    float64
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
}

// Effective merges layers (lowest priority first: built-in defaults, then
// broker-level defaults keyed by topic config name, then topic overrides) and
// returns the value of every known key.
func Effective(brokerDefaults, overrides map[string]string) map[string]string {
	out := make(map[string]string, len(defs))
	for _, d := range defs {
		out[d.Name] = d.Default
		if v, ok := brokerDefaults[d.Name]; ok {
			out[d.Name] = v
		}
		if v, ok := overrides[d.Name]; ok {
			out[d.Name] = v
		}
	}
	return out
}

// Parse returns the typed Config for the merged layers. Values are assumed
// validated; an unparsable value falls back to the built-in default.
func Parse(brokerDefaults, overrides map[string]string) Config {
	eff := Effective(brokerDefaults, overrides)
	i64 := func(k string) int64 {
		n, err := strconv.ParseInt(eff[k], 10, 64)
		if err != nil {
			n, _ = strconv.ParseInt(byName[k].Default, 10, 64)
		}
		return n
	}
	var c Config
	for _, p := range strings.Split(eff["cleanup.policy"], ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			c.Compact = true
		case "delete":
			c.Delete = true
		}
	}
	c.RetentionMs = i64("retention.ms")
	c.RetentionBytes = i64("retention.bytes")
	c.SegmentBytes = i64("segment.bytes")
	c.SegmentMs = i64("segment.ms")
	mmb := i64("max.message.bytes")
	if mmb > math.MaxInt32 {
		mmb = math.MaxInt32
	}
	c.MaxMessageBytes = int32(mmb)
	c.LogAppendTime = eff["message.timestamp.type"] == "LogAppendTime"
	c.DeleteRetentionMs = i64("delete.retention.ms")
	c.MinCompactionLagMs = i64("min.compaction.lag.ms")
	c.MaxCompactionLagMs = i64("max.compaction.lag.ms")
	c.MinCleanableRatio, _ = strconv.ParseFloat(eff["min.cleanable.dirty.ratio"], 64)
	c.TimestampBeforeMaxMs = i64("message.timestamp.before.max.ms")
	c.TimestampAfterMaxMs = i64("message.timestamp.after.max.ms")
	if d := i64("message.timestamp.difference.max.ms"); d < c.TimestampBeforeMaxMs {
		c.TimestampBeforeMaxMs = d
	}
	return c
}
