package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("bench: invalid config")

// Targets accepted by Config.Target.
const (
	TargetBrokers      = "brokers"       // the brokers named in Config.Brokers
	TargetKfake        = "kfake"         // an in-process kfake cluster
	TargetKfakeProcess = "kfake-process" // kfake in a child process
)

// Config is one bench run. Field comments name the command-line flag.
type Config struct {
	Brokers        []string          // --brokers
	Target         string            // --target: "brokers", "kfake" or "kfake-process"
	Compare        bool              // --compare: run against Brokers, then both kfakes, and report ratios
	Topic          string            // --topic; empty: bench-<unix nanos>, created and deleted
	Topics         int               // --topics: with N > 1 the workload spreads over <topic>-0 .. <topic>-(N-1)
	KeepTopic      bool              // --keep-topic
	Records        int64             // --records
	Size           int               // --size, bytes per record value
	Values         string            // --values: random (incompressible) or text (JSON-like, compressible)
	Partitions     int32             // --partitions
	Partitioner    string            // --partitioner: sticky (kgo's default for keyless records) or random (a random partition per record)
	Replication    int16             // --replication; -1 is the broker default
	Acks           string            // --acks: all, 1 or 0
	Idempotent     bool              // --idempotent; kgo allows it only with acks=all, so other acks turn it off
	Compression    string            // --compression: none, gzip, snappy, lz4, zstd
	Producers      int               // --producers, one kgo client each
	Linger         time.Duration     // --linger
	MaxInflight    int               // --max-inflight; 0 keeps the client default
	BatchMaxBytes  int32             // --batch-max-bytes; 0 keeps the client default
	MaxBuffered    int               // --max-buffered-records; 0 keeps the client default
	RateMBps       float64           // --rate, MB/s over all producers; 0 is unlimited
	Timeout        time.Duration     // --timeout for the whole run
	ConsumeTimeout time.Duration     // --consume-idle-timeout: give up after this long with no progress
	ProduceOnly    bool              // --produce-only: skip the consume phase
	JSON           bool              // --json
	DiskBWDir      string            // --disk-bw
	DiskBWBytes    int64             // --disk-bw-size
	ServerPID      int               // --server-pid: the broker's PID on this machine, for its CPU time
	Delay          time.Duration     // --delay: every record asks the broker to hold it this long (sluice-delay-ms); the consume phase is skipped
	TopicConfigs   map[string]string // --topic-config: configs of the topics the run creates
	ValuePrefix    []byte            // --value-prefix: bytes every value starts with (within --size)

	// KfakeCommand starts the child-process kfake; nil runs this binary's
	// `bench serve-kfake`.
	KfakeCommand KfakeCommand
}

// DefaultConfig is the configuration `sluice bench` starts from.
func DefaultConfig() Config {
	return Config{
		Brokers:        []string{"127.0.0.1:9092"},
		Target:         TargetBrokers,
		Records:        1_000_000,
		Size:           100,
		Topics:         1,
		Partitions:     1,
		Replication:    -1,
		Acks:           "all",
		Idempotent:     true,
		Compression:    "none",
		Producers:      1,
		Timeout:        30 * time.Minute,
		ConsumeTimeout: 30 * time.Second,
		DiskBWBytes:    1 << 30,
	}
}

// Validate reports the first problem with c, naming the flag.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch c.Target {
	case TargetBrokers, TargetKfake, TargetKfakeProcess:
	default:
		return bad("--target %q: want %q, %q or %q", c.Target, TargetBrokers, TargetKfake, TargetKfakeProcess)
	}
	needBrokers := c.Target == TargetBrokers || c.Compare
	if c.Records > 0 && needBrokers && len(c.Brokers) == 0 {
		return bad("--brokers is empty")
	}
	if c.Compare && c.Target != TargetBrokers {
		return bad("--compare runs kfake itself; use it with --target %s", TargetBrokers)
	}
	if c.Records < 0 || (c.Records == 0 && c.DiskBWDir == "") {
		return bad("--records %d: want > 0 (0 is allowed only with --disk-bw)", c.Records)
	}
	if c.Size < 0 {
		return bad("--size %d: want >= 0", c.Size)
	}
	if len(c.ValuePrefix) > c.Size {
		return bad("--value-prefix of %d bytes: longer than --size %d", len(c.ValuePrefix), c.Size)
	}
	if c.Values != "" && c.Values != ValuesRandom && c.Values != ValuesText {
		return bad("--values %q: want %s or %s", c.Values, ValuesRandom, ValuesText)
	}
	if c.Partitioner != "" && c.Partitioner != "sticky" && c.Partitioner != "random" {
		return bad("--partitioner %q: want sticky or random", c.Partitioner)
	}
	if c.Partitions < 1 {
		return bad("--partitions %d: want >= 1", c.Partitions)
	}
	if c.Topics < 1 {
		return bad("--topics %d: want >= 1", c.Topics)
	}
	if c.ServerPID < 0 {
		return bad("--server-pid %d: want a PID, or 0 for none", c.ServerPID)
	}
	if c.ServerPID > 0 && c.Target != TargetBrokers {
		return bad("--server-pid is for --target %s (the child-process kfake's PID is known; in-process kfake shares the driver's)", TargetBrokers)
	}
	if c.Replication == 0 || c.Replication < -1 {
		return bad("--replication %d: want -1 (broker default) or >= 1", c.Replication)
	}
	if _, err := parseAcks(c.Acks); err != nil {
		return bad("--acks: %v", err)
	}
	if c.idempotent() && c.MaxInflight > 1 {
		return bad("--max-inflight %d needs --idempotent=false (kgo pipelines idempotent produce itself)", c.MaxInflight)
	}
	if c.MaxInflight < 0 {
		return bad("--max-inflight %d: want >= 0", c.MaxInflight)
	}
	if _, err := parseCompression(c.Compression); err != nil {
		return bad("--compression: %v", err)
	}
	if c.Producers < 1 {
		return bad("--producers %d: want >= 1", c.Producers)
	}
	if int64(c.Producers) > c.Records && c.Records > 0 {
		return bad("--producers %d is more than --records %d", c.Producers, c.Records)
	}
	if c.Linger < 0 {
		return bad("--linger %v: want >= 0", c.Linger)
	}
	if c.BatchMaxBytes < 0 {
		return bad("--batch-max-bytes %d: want >= 0", c.BatchMaxBytes)
	}
	if c.MaxBuffered < 0 {
		return bad("--max-buffered-records %d: want >= 0", c.MaxBuffered)
	}
	if c.RateMBps < 0 {
		return bad("--rate %v: want >= 0", c.RateMBps)
	}
	if c.RateMBps > 0 && c.Size == 0 {
		return bad("--rate needs --size > 0")
	}
	if c.Timeout <= 0 {
		return bad("--timeout %v: want > 0", c.Timeout)
	}
	if c.ConsumeTimeout <= 0 {
		return bad("--consume-idle-timeout %v: want > 0", c.ConsumeTimeout)
	}
	if c.DiskBWDir != "" && c.DiskBWBytes < directBlock {
		return bad("--disk-bw-size %d: want >= %d", c.DiskBWBytes, directBlock)
	}
	return nil
}

// idempotent is whether producers really are idempotent: kgo refuses
// idempotence without acks=all, so weaker acks switch it off.
func (c Config) idempotent() bool {
	return c.Idempotent && (c.Acks == "all" || c.Acks == "-1")
}

func parseAcks(s string) (kgo.Acks, error) {
	switch s {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1", "leader":
		return kgo.LeaderAck(), nil
	case "0", "none":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, fmt.Errorf("%q: want all, 1 or 0", s)
}

func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%q: want none, gzip, snappy, lz4 or zstd", s)
}
