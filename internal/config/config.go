// Package config holds sluice's one configuration tree: defaults, validation,
// and loading from a YAML file, flags and SLUICE_* environment variables.
// It is the only package that reads the environment.
//
// Precedence, lowest first: built-in defaults, the YAML file, environment
// variables, command-line flags.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid configuration")

// Flush configures when the write-ahead log is fsynced.
type Flush struct {
	// Mode: "batch" (fsync every group commit; durable default), "messages"
	// (every Messages records), "interval" (every Interval), "os" (never
	// fsync; the OS writes back).
	Mode     string        `yaml:"mode"`
	Messages int64         `yaml:"messages"`
	Interval time.Duration `yaml:"interval"`
}

// Groups configures the consumer group coordinator. Kafka's names are in
// the comments.
type Groups struct {
	// OffsetsTopicPartitions is the partition count of __consumer_offsets
	// when it is created (offsets.topic.num.partitions).
	OffsetsTopicPartitions int32 `yaml:"offsets_topic_partitions"`
	// OffsetsRetention: offsets of an empty group are deleted this long
	// after it became empty (offsets.retention.minutes).
	OffsetsRetention time.Duration `yaml:"offsets_retention"`
	// OffsetsRetentionCheckInterval is how often expiry runs
	// (offsets.retention.check.interval.ms).
	OffsetsRetentionCheckInterval time.Duration `yaml:"offsets_retention_check_interval"`
	// InitialRebalanceDelay holds the first rebalance of an empty group
	// for more members (group.initial.rebalance.delay.ms).
	InitialRebalanceDelay time.Duration `yaml:"initial_rebalance_delay"`
	// MinSessionTimeout and MaxSessionTimeout bound member session timeouts
	// (group.min.session.timeout.ms, group.max.session.timeout.ms).
	MinSessionTimeout time.Duration `yaml:"min_session_timeout"`
	MaxSessionTimeout time.Duration `yaml:"max_session_timeout"`
	// MaxSize caps members per group; 0 is unlimited (group.max.size).
	MaxSize int32 `yaml:"max_size"`
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval are for KIP-848
	// consumer-protocol members (group.consumer.session.timeout.ms,
	// group.consumer.heartbeat.interval.ms).
	ConsumerSessionTimeout    time.Duration `yaml:"consumer_session_timeout"`
	ConsumerHeartbeatInterval time.Duration `yaml:"consumer_heartbeat_interval"`
}

// Transactions configures the transaction coordinator (Kafka's names in
// parentheses).
type Transactions struct {
	// StateTopicPartitions is the partition count of __transaction_state
	// when it is created (transaction.state.log.num.partitions).
	StateTopicPartitions int32 `yaml:"state_topic_partitions"`
	// MaxTimeout caps the transaction.timeout.ms a producer may ask for
	// (transaction.max.timeout.ms).
	MaxTimeout time.Duration `yaml:"max_timeout"`
	// AbortCheckInterval is how often transactions past their timeout are
	// aborted (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortCheckInterval time.Duration `yaml:"abort_check_interval"`
}

// S3 puts the data objects in a bucket of an S3-compatible service
// (cluster mode); with no endpoint they stay in data_dir. The keys are those
// of internal/objstore/s3.Config, which checks them fully when the store
// opens. Credentials usually come from the environment:
// SLUICE_S3_ACCESS_KEY, SLUICE_S3_SECRET_KEY, SLUICE_S3_SESSION_TOKEN.
type S3 struct {
	// Endpoint is host or host:port, no scheme (use_tls picks https).
	Endpoint string `yaml:"endpoint"`
	Bucket   string `yaml:"bucket"`
	// Prefix is prepended to every object name, so clusters can share a
	// bucket.
	Prefix string `yaml:"prefix"`
	// Region: empty asks the service.
	Region       string `yaml:"region"`
	AccessKey    string `yaml:"access_key"`
	SecretKey    string `yaml:"secret_key"`
	SessionToken string `yaml:"session_token"`
	UseTLS       bool   `yaml:"use_tls"`
	// Addressing: "auto" (virtual-host for AWS and GCS, else path),
	// "path" or "virtual-host".
	Addressing string `yaml:"addressing"`
	// CreateBucket creates a missing bucket at start instead of failing.
	CreateBucket bool `yaml:"create_bucket"`
}

// Etcd is the metadata store of a cluster. Setting Endpoints turns on
// cluster mode: brokers share topic and partition metadata in etcd and data
// objects in S3. With no endpoints the broker keeps its metadata in
// data_dir (single node). internal/meta/etcd checks the keys again when the
// store opens.
type Etcd struct {
	// Endpoints are etcd client addresses, host:port or http(s)://host:port;
	// one comma-separated string in flags and SLUICE_ETCD_ENDPOINTS.
	Endpoints []string `yaml:"endpoints"`
	// Prefix namespaces every key, so clusters can share one etcd.
	Prefix string `yaml:"prefix"`
	// DialTimeout bounds connecting to etcd at start.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// Username and Password enable etcd authentication; both or neither.
	// Usually from SLUICE_ETCD_USERNAME and SLUICE_ETCD_PASSWORD.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// CompactionInterval: every interval one broker compacts etcd's history
	// to the revision of one interval before, so that etcd, which keeps
	// every revision until compacted, never fills its space quota with
	// the writes of flush registrations. 0 turns it off (for an etcd that
	// runs --auto-compaction-* itself). Like Kubernetes' API server.
	CompactionInterval time.Duration `yaml:"compaction_interval"`
}

// Cluster configures membership in cluster mode (etcd.endpoints set).
type Cluster struct {
	// LeaseTTL is the etcd lease behind a broker's membership and
	// leaderships: a broker that stops renewing it (crashed, cut off) loses
	// them this long after its last renewal.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// TakeoverGrace is how long the other brokers leave a broker whose
	// session expired while they could not reach etcd either (an etcd
	// stall) to register a new session and keep its partitions, before
	// they take them over. A broker that dies while the others reach etcd
	// loses its partitions at its lease's expiry. 0: three times the
	// lease TTL.
	TakeoverGrace time.Duration `yaml:"takeover_grace"`
	// ClaimRate bounds the partition leaderships a broker claims per
	// second when it takes many over at once (a dead broker's share), so
	// that etcd is never flooded. 0: 2,000; negative: no bound.
	ClaimRate int64 `yaml:"claim_rate"`
	// OrphanGrace is how old an object in the store with no metadata
	// record (its flush died between the PUT and the registration) must be
	// before the controller deletes it. A flush gives its partitions up
	// rather than register an object older than half of it, so it must be
	// well above the longest object store or etcd stall to ride out.
	OrphanGrace time.Duration `yaml:"orphan_grace"`
	// PutHedge is how long a flush PUT may run before an identical second
	// PUT races it (the first to succeed wins), and the broker starts the
	// next flush alongside it. 0: adapt to the 99th percentile of recent
	// PUT times (at least 25 ms). Hedges are budgeted at 5% of PUTs
	// whatever the delay. A negative value turns hedging off: one PUT at
	// a time, each waited for.
	PutHedge time.Duration `yaml:"put_hedge"`
	// ReadAheadBytes bounds how far ahead of a consumer reading a
	// partition sequentially its data objects are loaded into the block
	// cache, so that its next fetches find them in memory (docs/memory.md).
	// 0: 8 MiB or an eighth of the block cache, whichever is smaller;
	// negative: no read-ahead.
	ReadAheadBytes int64 `yaml:"read_ahead_bytes"`
	// InterBrokerListener names the listener brokers send each other
	// requests through (transaction markers): PLAINTEXT when there is one
	// and this is empty. On a SASL listener they log in as
	// InterBrokerUser; on a TLS one they check the certificate against
	// InterBrokerCAFile (else the system's roots) and present their own.
	InterBrokerListener string `yaml:"inter_broker_listener"`
	// InterBrokerUser is "name:password", created at start like
	// sasl.users; with the authorizer on, make it a super user or grant
	// it CLUSTER_ACTION. Prefer SLUICE_CLUSTER_INTER_BROKER_USER.
	InterBrokerUser string `yaml:"inter_broker_user"`
	// InterBrokerCAFile is the PEM CA brokers' certificates are checked
	// against on a TLS inter-broker listener.
	InterBrokerCAFile string `yaml:"inter_broker_ca_file"`
}

// Config is the whole broker configuration.
type Config struct {
	// Listen is the Kafka listener address (host:port; port 0 picks one).
	Listen string `yaml:"listen"`
	// AdvertisedAddr is the host:port clients are told to connect to;
	// empty means derived from Listen.
	AdvertisedAddr string `yaml:"advertised_addr"`
	// Listeners, when set, replace Listen: NAME://host:port each, NAME a
	// security protocol (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL), at
	// most one of each.
	// The first is the broker's main address.
	Listeners []string `yaml:"listeners"`
	// AdvertisedListeners are NAME://host:port for listeners whose
	// advertised address is not derived from the bound one.
	AdvertisedListeners []string `yaml:"advertised_listeners"`
	// SASL configures authentication on SASL_PLAINTEXT and SASL_SSL
	// listeners.
	SASL SASL `yaml:"sasl"`
	// TLS configures SSL and SASL_SSL listeners.
	TLS TLS `yaml:"tls"`
	// Authorizer configures ACL checks.
	Authorizer Authorizer `yaml:"authorizer"`
	// AdminListen is the HTTP address of the admin listener (/metrics,
	// /healthz, the JSON API under /v1/, profiling); empty disables it. By
	// default it listens on the loopback interface only.
	AdminListen string `yaml:"admin_listen"`
	// DataDir holds the WAL, local objects and embedded metadata.
	DataDir string `yaml:"data_dir"`
	// NodeID is this broker's id.
	NodeID int32 `yaml:"node_id"`
	// Rack is this broker's rack (Kafka's broker.rack), reported in
	// Metadata and DescribeCluster; empty means none.
	Rack string `yaml:"rack"`
	// ClusterID is reported in Metadata; empty means generated once and kept.
	ClusterID string `yaml:"cluster_id"`

	AutoCreateTopics  bool  `yaml:"auto_create_topics"`
	DefaultPartitions int32 `yaml:"default_partitions"`
	// MaxRequestBytes bounds one request frame (socket.request.max.bytes).
	MaxRequestBytes int32 `yaml:"max_request_bytes"`
	// QueuedMaxRequestBytes bounds the bytes of requests being read or in
	// flight on all connections together (queued.max.request.bytes); at
	// the bound, connections wait before reading more. -1: unbounded; 0:
	// an eighth of the memory budget.
	QueuedMaxRequestBytes int64 `yaml:"queued_max_request_bytes"`
	// FetchMaxBytes caps one Fetch response (Kafka's broker
	// fetch.max.bytes, default 55 MiB). 0: 55 MiB or a sixteenth of the
	// memory budget, whichever is less.
	FetchMaxBytes int32 `yaml:"fetch_max_bytes"`
	// MaxConnections and MaxConnectionsPerIP close new connections past
	// that many open, on all listeners or from one address
	// (max.connections, max.connections.per.ip). 0: unlimited.
	MaxConnections      int32 `yaml:"max_connections"`
	MaxConnectionsPerIP int32 `yaml:"max_connections_per_ip"`
	// ConnectionsMaxIdle closes a connection idle this long
	// (connections.max.idle.ms). 0: never.
	ConnectionsMaxIdle time.Duration `yaml:"connections_max_idle"`
	// RequestReadTimeout closes a connection that began sending a request
	// and has not sent all of it within this long. 0: none.
	RequestReadTimeout time.Duration `yaml:"request_read_timeout"`

	Flush Flush `yaml:"flush"`
	// WALSegmentBytes is the size at which a WAL file is closed and rolled
	// into objects. 0: from the memory budget (64 MiB once the budget is
	// 2.5 GiB or more; unrolled data is held in memory).
	WALSegmentBytes int64 `yaml:"wal_segment_bytes"`
	// MinFreeBytes: below this much free space on the data dir's file
	// system, produce is refused with KAFKA_STORAGE_ERROR until space is
	// freed (-1: off; a write that finds the disk full still stops
	// appends until space is freed). Offset commits, coordinator state and
	// transaction markers go on down to half of it, the hard floor, so
	// consumers can drain. Single node only.
	MinFreeBytes int64 `yaml:"min_free_bytes"`
	// DecompressBudgetBytes bounds the memory of all decompressions in
	// flight (produce validation of compressed batches, timestamp
	// lookups, compaction); work past it waits for its turn. 0: an eighth
	// of the memory budget.
	DecompressBudgetBytes int64 `yaml:"decompress_budget_bytes"`
	// CleanerDedupeBufferBytes bounds compaction's key map (Kafka's
	// log.cleaner.dedupe.buffer.size): 24 bytes a key. A compacted
	// partition whose dirty part holds more distinct keys than fit is
	// cleaned in several passes. 0: a thirty-second of the memory budget,
	// 4 to 128 MiB.
	CleanerDedupeBufferBytes int64 `yaml:"cleaner_dedupe_buffer_bytes"`
	// DecompressRatio: a batch may hold at most this many times its
	// topic's max.message.bytes once decompressed (at least 8 MiB, at
	// most decompress_budget_bytes); past it produce refuses the batch
	// with MESSAGE_TOO_LARGE.
	DecompressRatio int `yaml:"decompress_ratio"`
	// RetentionCheckInterval is how often retention, producer expiry and
	// garbage collection run (Kafka's log.retention.check.interval.ms,
	// default 5 minutes); compaction also runs every log.cleaner.backoff.ms.
	RetentionCheckInterval time.Duration `yaml:"retention_check_interval"`
	// ProducerIDExpiration is how long an idempotent producer's state is
	// kept after its last write (Kafka's producer.id.expiration.ms).
	ProducerIDExpiration time.Duration `yaml:"producer_id_expiration"`

	// TopicDefaults are broker-level defaults for topic configs, keyed by the
	// topic config name (retention.ms, max.message.bytes, ...).
	TopicDefaults map[string]string `yaml:"topic_defaults"`

	Groups Groups `yaml:"groups"`

	Transactions Transactions `yaml:"transactions"`

	Delay Delay `yaml:"delay"`

	// Lag configures consumer lag verdicts.
	Lag Lag `yaml:"lag"`

	// Metrics configures the per-topic and per-partition metrics.
	Metrics Metrics `yaml:"metrics"`

	// Lineage configures who-produces-and-consumes-what recording.
	Lineage Lineage `yaml:"lineage"`

	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`

	// Governance holds topic policies.
	Governance Governance `yaml:"governance"`

	S3 S3 `yaml:"s3"`

	Etcd    Etcd    `yaml:"etcd"`
	Cluster Cluster `yaml:"cluster"`

	LogLevel  string `yaml:"log_level"`
	LogFormat string `yaml:"log_format"` // text or json

	// GCPercent is the Go garbage collector's target (as GOGC): higher
	// trades memory for fewer collections. The default, 400, measured
	// 1.2-1.4x the produce throughput of the runtime's 100 for about twice
	// the resident memory (docs/benchmarks.md). 0 leaves the runtime's
	// setting (the GOGC environment variable, else 100).
	GCPercent int32 `yaml:"gc_percent"`
	// MemoryLimitMB is the soft limit on the Go heap (as GOMEMLIMIT): near
	// it the collector runs more often whatever GCPercent says. 0: 85 % of
	// the memory budget; -1: none beyond GOMEMLIMIT.
	MemoryLimitMB int64 `yaml:"memory_limit_mb"`
	// MemoryBudgetMB is the memory the broker sizes itself to: its heap
	// limit, request and decompression budgets, WAL segments, caches
	// (docs/memory.md). Resident memory stays within it plus 10 %. 0: a
	// quarter of the machine's (or the cgroup's) memory, 256 MiB to 16 GiB.
	MemoryBudgetMB int64 `yaml:"memory_budget_mb"`
	// IdleMemoryReturn is how often a quiet broker checks whether to give
	// free heap memory back to the system (docs/memory.md). 0: never.
	IdleMemoryReturn time.Duration `yaml:"idle_memory_return"`
}

// DefaultAdminListen is the admin listener's default address: the loopback
// interface only, on Redpanda's admin port, so that the API and metrics
// are on without being exposed.
const DefaultAdminListen = "127.0.0.1:9644"

// Default returns the built-in defaults.
func Default() Config {
	return Config{
		Listen:                 "0.0.0.0:9092",
		AdminListen:            DefaultAdminListen,
		DataDir:                "./sluice-data",
		NodeID:                 1,
		AutoCreateTopics:       true,
		DefaultPartitions:      1,
		MaxRequestBytes:        100 << 20,
		MaxConnections:         10000,
		ConnectionsMaxIdle:     10 * time.Minute,
		RequestReadTimeout:     30 * time.Second,
		Flush:                  Flush{Mode: "batch", Messages: 10000, Interval: 100 * time.Millisecond},
		MinFreeBytes:           128 << 20,
		DecompressRatio:        32,
		RetentionCheckInterval: 5 * time.Minute,
		ProducerIDExpiration:   24 * time.Hour,
		TopicDefaults:          map[string]string{},
		Groups: Groups{
			OffsetsTopicPartitions:        50,
			OffsetsRetention:              7 * 24 * time.Hour,
			OffsetsRetentionCheckInterval: 10 * time.Minute,
			InitialRebalanceDelay:         3 * time.Second,
			MinSessionTimeout:             6 * time.Second,
			MaxSessionTimeout:             30 * time.Minute,
			ConsumerSessionTimeout:        45 * time.Second,
			ConsumerHeartbeatInterval:     5 * time.Second,
		},
		Transactions: Transactions{
			StateTopicPartitions: 50,
			MaxTimeout:           15 * time.Minute,
			AbortCheckInterval:   10 * time.Second,
		},
		Delay: Delay{Enabled: true, StorePartitions: 8, MaxDelay: 90 * 24 * time.Hour,
			Horizon: 10 * time.Minute, MemoryEntries: 250_000, StoreMinCompactionLag: time.Hour},
		Lag:              Lag{Window: 10, MinDistance: time.Second, StoppedAfter: time.Minute, MaxPartitions: 1 << 20},
		Metrics:          Metrics{PerTopic: true, TopPartitions: 20},
		Lineage:          Lineage{Enabled: true, FlushInterval: 30 * time.Second, MaxEdges: 100_000},
		SchemaRegistry:   SchemaRegistry{Listen: DefaultSchemaRegistryListen},
		S3:               S3{Addressing: "auto"},
		Etcd:             Etcd{Prefix: "/sluice/", DialTimeout: 5 * time.Second, CompactionInterval: 5 * time.Minute},
		Cluster:          Cluster{LeaseTTL: 3 * time.Second, OrphanGrace: time.Hour},
		LogLevel:         "info",
		LogFormat:        "text",
		GCPercent:        400,
		IdleMemoryReturn: 30 * time.Second,
	}
}

// ClusterMode reports whether the broker runs as one of a cluster: metadata
// in etcd, data in S3. It is set by etcd.endpoints.
func (c Config) ClusterMode() bool { return len(c.Etcd.Endpoints) > 0 }

// Validate checks every key and names the bad one.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "%q is not host:port: %v", c.Listen, err)
	}
	if c.AdvertisedAddr != "" {
		h, p, err := net.SplitHostPort(c.AdvertisedAddr)
		if err != nil || h == "" {
			return bad("advertised_addr", "%q is not host:port", c.AdvertisedAddr)
		}
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return bad("advertised_addr", "port %q out of range", p)
		}
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.AdminListen != "" {
		if _, _, err := net.SplitHostPort(c.AdminListen); err != nil {
			return bad("admin_listen", "%q is not host:port", c.AdminListen)
		}
	}
	if l := c.SchemaRegistry.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return bad("schema_registry.listen", "%q is not host:port", l)
		}
	}
	if c.DataDir == "" {
		return bad("data_dir", "must not be empty")
	}
	if c.NodeID < 0 {
		return bad("node_id", "must be >= 0, got %d", c.NodeID)
	}
	if c.DefaultPartitions < 1 {
		return bad("default_partitions", "must be >= 1, got %d", c.DefaultPartitions)
	}
	if err := c.validateNetwork(bad); err != nil {
		return err
	}
	switch c.Flush.Mode {
	case "batch", "os":
	case "messages":
		if c.Flush.Messages < 1 {
			return bad("flush.messages", "must be >= 1 with flush.mode=messages")
		}
	case "interval":
		if c.Flush.Interval <= 0 {
			return bad("flush.interval", "must be > 0 with flush.mode=interval")
		}
	default:
		return bad("flush.mode", "%q is not one of batch, messages, interval, os", c.Flush.Mode)
	}
	if c.WALSegmentBytes != 0 && c.WALSegmentBytes < 1<<20 {
		return bad("wal_segment_bytes", "must be 0 (from the memory budget) or >= 1048576, got %d", c.WALSegmentBytes)
	}
	if c.CleanerDedupeBufferBytes != 0 && (c.CleanerDedupeBufferBytes < 1<<20 || c.CleanerDedupeBufferBytes > 16<<30) {
		return bad("cleaner_dedupe_buffer_bytes", "must be 0 (from the memory budget) or 1 MiB (1048576) to 16 GiB, got %d", c.CleanerDedupeBufferBytes)
	}
	if c.DecompressBudgetBytes != 0 && c.DecompressBudgetBytes < 8<<20 {
		return bad("decompress_budget_bytes", "must be 0 (from the memory budget) or at least 8 MiB (8388608), got %d", c.DecompressBudgetBytes)
	}
	if c.IdleMemoryReturn < 0 || (c.IdleMemoryReturn > 0 && c.IdleMemoryReturn < 100*time.Millisecond) {
		return bad("idle_memory_return", "must be 0 (never) or >= 100ms, got %v", c.IdleMemoryReturn)
	}
	if c.MemoryBudgetMB != 0 && c.MemoryBudgetMB < MinMemoryBudget>>20 {
		return bad("memory_budget_mb", "must be 0 (from the machine's memory) or at least %d, got %d", MinMemoryBudget>>20, c.MemoryBudgetMB)
	}
	if c.DecompressRatio < 1 {
		return bad("decompress_ratio", "must be >= 1, got %d", c.DecompressRatio)
	}
	if c.MinFreeBytes < -1 || c.MinFreeBytes == 0 {
		return bad("min_free_bytes", "must be > 0, or -1 for off; got %d", c.MinFreeBytes)
	}
	if c.RetentionCheckInterval <= 0 {
		return bad("retention_check_interval", "must be > 0")
	}
	if c.ProducerIDExpiration <= 0 {
		return bad("producer_id_expiration", "must be > 0")
	}
	for k, v := range c.TopicDefaults {
		if err := topicconfig.ValidateValue(k, v); err != nil {
			return fmt.Errorf("%w: topic_defaults.%s: %v", ErrInvalid, k, err)
		}
	}
	g := c.Groups
	switch {
	case g.OffsetsTopicPartitions < 1 || g.OffsetsTopicPartitions > 10000:
		return bad("groups.offsets_topic_partitions", "must be 1..10000, got %d", g.OffsetsTopicPartitions)
	case g.OffsetsRetention <= 0:
		return bad("groups.offsets_retention", "must be > 0")
	case g.OffsetsRetentionCheckInterval <= 0:
		return bad("groups.offsets_retention_check_interval", "must be > 0")
	case g.InitialRebalanceDelay < 0:
		return bad("groups.initial_rebalance_delay", "must be >= 0")
	case g.MinSessionTimeout <= 0:
		return bad("groups.min_session_timeout", "must be > 0")
	case g.MaxSessionTimeout < g.MinSessionTimeout:
		return bad("groups.max_session_timeout", "must be >= groups.min_session_timeout")
	case g.MaxSize < 0:
		return bad("groups.max_size", "must be >= 0")
	case g.ConsumerHeartbeatInterval <= 0:
		return bad("groups.consumer_heartbeat_interval", "must be > 0")
	case g.ConsumerSessionTimeout <= g.ConsumerHeartbeatInterval:
		return bad("groups.consumer_session_timeout", "must be > groups.consumer_heartbeat_interval")
	}
	switch t := c.Transactions; {
	case t.StateTopicPartitions < 1 || t.StateTopicPartitions > 10000:
		return bad("transactions.state_topic_partitions", "must be 1..10000, got %d", t.StateTopicPartitions)
	case t.MaxTimeout < time.Millisecond:
		return bad("transactions.max_timeout", "must be >= 1ms")
	case t.AbortCheckInterval <= 0:
		return bad("transactions.abort_check_interval", "must be > 0")
	}
	if err := c.validateFeatures(bad); err != nil {
		return err
	}
	if err := c.S3.validate(bad); err != nil {
		return err
	}
	if err := c.Etcd.validate(bad); err != nil {
		return err
	}
	if c.Cluster.LeaseTTL < time.Second {
		return bad("cluster.lease_ttl", "must be >= 1s, got %s", c.Cluster.LeaseTTL)
	}
	if c.Cluster.TakeoverGrace < 0 {
		return bad("cluster.takeover_grace", "must be >= 0, got %s", c.Cluster.TakeoverGrace)
	}
	if h := c.Cluster.PutHedge; h > 0 && (h < time.Millisecond || h > time.Minute) {
		return bad("cluster.put_hedge", "%v: must be 0 (adaptive), negative (off) or between 1ms and 1m", h)
	}
	if c.Cluster.OrphanGrace < 10*time.Second {
		return bad("cluster.orphan_grace", "must be >= 10s, got %s", c.Cluster.OrphanGrace)
	}
	if c.ClusterMode() && c.S3.Endpoint == "" {
		// s3.validate has checked that an endpoint comes with a bucket.
		return bad("s3.endpoint", "cluster mode (etcd.endpoints set) needs an S3 object store: set s3.endpoint and s3.bucket")
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return bad("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return bad("log_format", "%q is not text or json", c.LogFormat)
	}
	if c.GCPercent != 0 && (c.GCPercent < 10 || c.GCPercent > 10000) {
		return bad("gc_percent", "must be 0 (runtime default) or 10..10000, got %d", c.GCPercent)
	}
	if c.MemoryLimitMB != 0 && c.MemoryLimitMB != -1 && c.MemoryLimitMB < 64 {
		return bad("memory_limit_mb", "must be 0 (from the memory budget), -1 (none) or at least 64, got %d", c.MemoryLimitMB)
	}
	return nil
}

// validate checks the s3 keys that can be checked without the client;
// internal/objstore/s3 checks the rest (bucket naming rules, ports) at start.
func (s S3) validate(bad func(key, format string, args ...any) error) error {
	switch s.Addressing {
	case "auto", "path", "virtual-host":
	default:
		return bad("s3.addressing", "%q is not one of auto, path, virtual-host", s.Addressing)
	}
	if s.Endpoint == "" {
		if s.Bucket != "" || s.Prefix != "" || s.AccessKey != "" || s.SecretKey != "" || s.SessionToken != "" {
			return bad("s3.endpoint", "must be set when other s3 keys are")
		}
		return nil
	}
	switch {
	case strings.Contains(s.Endpoint, "://"):
		return bad("s3.endpoint", "%q: give host:port without a scheme (s3.use_tls selects https)", s.Endpoint)
	case strings.ContainsAny(s.Endpoint, "/?# "):
		return bad("s3.endpoint", "%q: want host or host:port, no path", s.Endpoint)
	case s.Bucket == "":
		return bad("s3.bucket", "must be set with s3.endpoint")
	case strings.HasPrefix(s.Prefix, "/") || strings.Contains(s.Prefix, "//"):
		return bad("s3.prefix", "%q: no leading slash or empty segment", s.Prefix)
	case s.AccessKey == "" && s.SecretKey != "":
		return bad("s3.access_key", "must be set when s3.secret_key is")
	case s.AccessKey != "" && s.SecretKey == "":
		return bad("s3.secret_key", "must be set when s3.access_key is")
	case s.SessionToken != "" && s.AccessKey == "":
		return bad("s3.session_token", "needs s3.access_key and s3.secret_key")
	}
	return nil
}

// validate checks the etcd keys that can be checked without a client.
func (e Etcd) validate(bad func(key, format string, args ...any) error) error {
	for _, ep := range e.Endpoints {
		if err := checkEtcdEndpoint(ep); err != nil {
			return bad("etcd.endpoints", "%q: %v", ep, err)
		}
	}
	switch {
	case e.Prefix == "":
		return bad("etcd.prefix", "must not be empty, so keys never collide with other users of the etcd cluster")
	case !strings.HasSuffix(e.Prefix, "/"):
		// Without it "/sluice/a" would also hold the keys of "/sluice/ab".
		return bad("etcd.prefix", "%q must end with /", e.Prefix)
	case e.DialTimeout <= 0:
		return bad("etcd.dial_timeout", "must be > 0")
	case e.CompactionInterval < 0 || (e.CompactionInterval > 0 && e.CompactionInterval < time.Second):
		return bad("etcd.compaction_interval", "%v: must be 0 (off) or at least 1s", e.CompactionInterval)
	case e.Username == "" && e.Password != "":
		return bad("etcd.username", "must be set when etcd.password is")
	case e.Username != "" && e.Password == "":
		return bad("etcd.password", "must be set when etcd.username is")
	case len(e.Endpoints) == 0 && e.Username != "":
		return bad("etcd.endpoints", "must be set when etcd.username is")
	}
	return nil
}

// checkEtcdEndpoint accepts host:port and http(s)://host:port.
func checkEtcdEndpoint(ep string) error {
	hostPort := ep
	if scheme, rest, ok := strings.Cut(ep, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return fmt.Errorf("scheme %q is not http or https", scheme)
		}
		hostPort = rest
	}
	if strings.ContainsAny(hostPort, "/?# ") {
		return errors.New("want host:port or http(s)://host:port, no path")
	}
	h, p, err := net.SplitHostPort(hostPort)
	if err != nil || h == "" {
		return errors.New("want host:port or http(s)://host:port")
	}
	if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("port %q out of range", p)
	}
	return nil
}

// LoadFile merges a YAML file into c. Unknown keys are errors.
func (c *Config) LoadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: config file: %v", ErrInvalid, err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("%w: config file %s: %v", ErrInvalid, path, err)
	}
	return nil
}

// envKeys maps SLUICE_* variables to YAML keys (nested with "."), derived
// from the struct tags so they cannot drift.
func envKeys() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				walk(f.Type, key+".")
				continue
			}
			env := "SLUICE_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(key))
			out[env] = key
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// LoadEnv applies SLUICE_* variables from environ (os.Environ() form).
// SLUICE_TOPIC_DEFAULTS takes "k=v,k=v"; list keys such as
// SLUICE_ETCD_ENDPOINTS take "a,b".
func (c *Config) LoadEnv(environ []string) error {
	keys := envKeys()
	names := make([]string, 0, len(environ))
	vals := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "SLUICE_") {
			continue
		}
		if _, known := keys[k]; !known {
			continue // other SLUICE_ variables (e.g. SLUICE_BROKERS for the CLI) are not ours
		}
		names = append(names, k)
		vals[k] = v
	}
	sort.Strings(names)
	for _, k := range names {
		if err := c.Set(keys[k], vals[k]); err != nil {
			return fmt.Errorf("%w (from %s)", err, k)
		}
	}
	return nil
}

// Set assigns one key given in YAML form ("flush.mode") from a string.
func (c *Config) Set(key, value string) error {
	bad := func(err error) error { return fmt.Errorf("%w: %s: %v", ErrInvalid, key, err) }
	v := reflect.ValueOf(c).Elem()
	parts := strings.Split(key, ".")
	for i, p := range parts {
		t := v.Type()
		found := false
		for j := 0; j < t.NumField(); j++ {
			if t.Field(j).Tag.Get("yaml") == p {
				v = v.Field(j)
				found = true
				break
			}
		}
		if !found {
			return bad(errors.New("unknown key"))
		}
		if i < len(parts)-1 && v.Kind() != reflect.Struct {
			return bad(errors.New("unknown key"))
		}
	}
	switch {
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(value)
		if err != nil {
			return bad(err)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(value)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return bad(err)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int32 || v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(value, 10, v.Type().Bits())
		if err != nil {
			return bad(err)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		// "a, b,,c" is [a b c]; "" clears the list.
		var list []string
		for _, item := range strings.Split(value, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		v.Set(reflect.ValueOf(list))
	case v.Kind() == reflect.Map:
		m := map[string]string{}
		for _, kv := range strings.Split(value, ",") {
			if kv == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				return bad(fmt.Errorf("%q is not k=v", kv))
			}
			m[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
		v.Set(reflect.ValueOf(m))
	default:
		return bad(errors.New("unsupported type"))
	}
	return nil
}
