package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/server"
)

// flagKeys maps serve's flags to config keys: flags -> config is all this
// file does.
var flagKeys = []struct{ flag, key, usage string }{
	{"listen", "listen", "Kafka listener host:port"},
	{"data-dir", "data_dir", "directory for the WAL, objects and metadata"},
	{"advertised-addr", "advertised_addr", "host:port clients are told to connect to"},
	{"listeners", "listeners", "Kafka listeners NAME://host:port, comma-separated, NAME PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL (replaces --listen)"},
	{"advertised-listeners", "advertised_listeners", "NAME://host:port clients are told for each listener, comma-separated"},
	{"sasl-mechanisms", "sasl.mechanisms", "SASL mechanisms on SASL_PLAINTEXT listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (empty: all)"},
	{"sasl-session-lifetime", "sasl.session_lifetime", "end SASL logins after this long; clients re-authenticate (KIP-368) or are disconnected (0: never)"},
	{"sasl-users", "sasl.users", "name:password users created at start when missing, comma-separated (prefer SLUICE_SASL_USERS: flags show in ps)"},
	{"tls-cert-file", "tls.cert_file", "PEM certificate chain of SSL and SASL_SSL listeners"},
	{"tls-key-file", "tls.key_file", "PEM private key of SSL and SASL_SSL listeners"},
	{"tls-client-ca-file", "tls.client_ca_file", "PEM CA certificates client certificates are checked against"},
	{"tls-client-auth", "tls.client_auth", "client certificates: none, requested or required (Kafka's ssl.client.auth)"},
	{"authorizer-enabled", "authorizer.enabled", "check requests against ACLs (true/false); off, the ACL APIs answer SECURITY_DISABLED"},
	{"super-users", "authorizer.super_users", "principals allowed everything, comma-separated (e.g. User:admin)"},
	{"allow-everyone-if-no-acl-found", "authorizer.allow_everyone_if_no_acl_found", "allow operations on resources no ACL names (true/false)"},
	{"admin-listen", "admin_listen", "HTTP address of the admin API, /metrics and /healthz (default 127.0.0.1:9644; empty: off)"},
	{"schema-registry-listen", "schema_registry.listen", "HTTP address of the Confluent-compatible schema registry (default 127.0.0.1:8081; empty: off)"},
	{"node-id", "node_id", "this broker's node id"},
	{"rack", "rack", "this broker's rack, reported to clients (Kafka's broker.rack)"},
	{"cluster-id", "cluster_id", "cluster id (generated on first start when empty)"},
	{"default-partitions", "default_partitions", "partitions for auto-created topics and CreateTopics with -1"},
	{"auto-create-topics", "auto_create_topics", "create unknown topics on first metadata request (true/false)"},
	{"max-request-bytes", "max_request_bytes", "largest request frame accepted (Kafka's socket.request.max.bytes)"},
	{"fetch-max-bytes", "fetch_max_bytes", "most bytes one Fetch response returns, whatever the consumer asks (Kafka's broker fetch.max.bytes; 0: 55 MiB or a sixteenth of the memory budget)"},
	{"queued-max-request-bytes", "queued_max_request_bytes", "bytes of requests all connections may hold at once; past it connections wait before reading more (Kafka's queued.max.request.bytes; -1: unbounded)"},
	{"max-connections", "max_connections", "close new connections past this many open (Kafka's max.connections; 0: unlimited)"},
	{"max-connections-per-ip", "max_connections_per_ip", "close new connections past this many open from one address (Kafka's max.connections.per.ip; 0: unlimited)"},
	{"connections-max-idle", "connections_max_idle", "close connections idle this long (Kafka's connections.max.idle.ms; 0: never)"},
	{"request-read-timeout", "request_read_timeout", "close a connection that has not sent a request in full this long after it began (0: none)"},
	{"flush", "flush.mode", "when the WAL is fsynced: batch (every group commit), messages, interval, os"},
	{"flush-messages", "flush.messages", "records between fsyncs with --flush=messages"},
	{"flush-interval", "flush.interval", "time between fsyncs with --flush=interval (e.g. 50ms)"},
	{"wal-segment-bytes", "wal_segment_bytes", "WAL file size at which it is rolled into objects"},
	{"decompress-budget-bytes", "decompress_budget_bytes", "memory budget of all decompressions in flight (produce validation, timestamp lookups, compaction)"},
	{"cleaner-dedupe-buffer-bytes", "cleaner_dedupe_buffer_bytes", "compaction's key map, 24 bytes a key (log.cleaner.dedupe.buffer.size); more distinct keys are cleaned in several passes"},
	{"decompress-ratio", "decompress_ratio", "a batch may hold at most this many times its topic's max.message.bytes once decompressed"},
	{"memory-budget-mb", "memory_budget_mb", "memory the broker sizes itself to (heap limit, request and decompression budgets, WAL segments, caches); 0: a quarter of the machine's"},
	{"idle-memory-return", "idle_memory_return", "how often a quiet broker gives free heap memory back to the system (0: never)"},
	{"min-free-bytes", "min_free_bytes", "refuse produce (KAFKA_STORAGE_ERROR) while the data dir's file system has less free space than this; offset commits and transaction markers go on down to half of it; resume when freed (-1: off)"},
	{"retention-check-interval", "retention_check_interval", "how often retention, producer expiry and garbage collection run (Kafka's log.retention.check.interval.ms)"},
	{"producer-id-expiration", "producer_id_expiration", "how long idempotent producer state is kept after the producer's last write"},
	{"topic-defaults", "topic_defaults", "broker-level topic config defaults, k=v,k=v (e.g. retention.ms=3600000)"},
	{"s3-endpoint", "s3.endpoint", "S3-compatible service host:port for data objects (empty: objects stay in --data-dir)"},
	{"s3-bucket", "s3.bucket", "S3 bucket for data objects"},
	{"s3-prefix", "s3.prefix", "prefix of every object name, so clusters can share a bucket"},
	{"s3-region", "s3.region", "S3 region (empty: ask the service)"},
	{"s3-access-key", "s3.access_key", "S3 access key (prefer SLUICE_S3_ACCESS_KEY)"},
	{"s3-secret-key", "s3.secret_key", "S3 secret key (prefer SLUICE_S3_SECRET_KEY: flags show in ps)"},
	{"s3-addressing", "s3.addressing", "S3 bucket addressing: auto, path, virtual-host"},
	{"s3-use-tls", "s3.use_tls", "talk https to the S3 endpoint (true/false)"},
	{"s3-create-bucket", "s3.create_bucket", "create a missing bucket at start (true/false)"},
	{"etcd-endpoints", "etcd.endpoints", "etcd endpoints, host:port or http(s)://host:port, comma-separated; setting them runs in cluster mode (needs --s3-endpoint)"},
	{"etcd-prefix", "etcd.prefix", "prefix of every etcd key, so clusters can share an etcd"},
	{"etcd-compaction-interval", "etcd.compaction_interval", "cluster mode: how often one broker compacts etcd's history to one interval ago (0: off, leave it to etcd's --auto-compaction-*)"},
	{"lease-ttl", "cluster.lease_ttl", "cluster mode: how long after its last lease renewal a broker loses membership and leaderships"},
	{"takeover-grace", "cluster.takeover_grace", "cluster mode: how long a broker whose session expired in an etcd stall has to come back before others take its partitions (0: three times the lease TTL)"},
	{"claim-rate", "cluster.claim_rate", "cluster mode: partition leaderships a broker claims per second at most when taking many over (0: 2000; negative: no bound)"},
	{"orphan-grace", "cluster.orphan_grace", "cluster mode: age at which an object never registered (its writer died) is deleted"},
	{"inter-broker-listener", "cluster.inter_broker_listener", "cluster mode: the listener brokers send each other requests through (default PLAINTEXT)"},
	{"inter-broker-user", "cluster.inter_broker_user", "cluster mode: name:password brokers log in with on a SASL inter-broker listener (prefer SLUICE_CLUSTER_INTER_BROKER_USER)"},
	{"inter-broker-ca-file", "cluster.inter_broker_ca_file", "cluster mode: PEM CA of the brokers' certificates on a TLS inter-broker listener"},
	{"put-hedge", "cluster.put_hedge", "cluster mode: race a flush PUT with a second one after this long, for at most 5% of PUTs (0: the recent p99 PUT time, at least 25ms; negative: never)"},
	{"read-ahead-bytes", "cluster.read_ahead_bytes", "cluster mode: how far ahead of a consumer reading a partition in order its data is loaded into the block cache (0: 8 MiB or an eighth of the cache; negative: none)"},
	{"lag-window", "lag.window", "commits per group and partition the lag verdict is made from (Burrow's intervals)"},
	{"lag-stopped-after", "lag.stopped_after", "least time without commits, with lag, before a partition is STOPPED"},
	{"metrics-per-topic", "metrics.per_topic", "count produce and fetch traffic per partition and export per-topic, per-partition and per-group series on /metrics (true/false)"},
	{"metrics-top-partitions", "metrics.top_partitions", "partitions with series of their own on /metrics: the busiest, and per group the most lagging (0: none)"},
	{"lineage-enabled", "lineage.enabled", "record who produces to and consumes which topics (true/false)"},
	{"lineage-flush-interval", "lineage.flush_interval", "how often observed producer/consumer relations are written to the metadata store"},
	{"topic-name-pattern", "governance.topic_name_pattern", "regular expression every new topic name must match (e.g. ^[a-z][a-z0-9-]*\\.[a-z][a-z0-9-]*\\.v[0-9]+$; empty: any)"},
	{"schema-required", "governance.schema_required", "regular expressions, comma-separated, of topic names whose value validation (sluice.value.schema.validation) defaults to true, e.g. ^payments\\. (patterns with a comma: use the config file)"},
	{"log-level", "log_level", "debug, info, warn, error"},
	{"log-format", "log_format", "text or json"},
	{"gc-percent", "gc_percent", "Go GC target percent, as GOGC (default 400; 0: the runtime's); higher uses more memory for fewer collections"},
	{"memory-limit-mb", "memory_limit_mb", "soft limit on the Go heap in MiB, as GOMEMLIMIT (0: 85% of the memory budget; -1: none)"},
}

func serveCommand() *cobra.Command {
	var configFile, readyFile string
	vals := make([]string, len(flagKeys))
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker (single node on local disk by default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if configFile != "" {
				if err := cfg.LoadFile(configFile); err != nil {
					return err
				}
			}
			if err := cfg.LoadEnv(os.Environ()); err != nil {
				return err
			}
			for i, f := range flagKeys {
				if cmd.Flags().Changed(f.flag) {
					if err := cfg.Set(f.key, vals[i]); err != nil {
						return fmt.Errorf("%w (from --%s)", err, f.flag)
					}
				}
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			logger := newLogger(cfg)
			if cfg.GCPercent > 0 {
				debug.SetGCPercent(int(cfg.GCPercent))
			}
			if mem := cfg.Memory(config.MachineMemory()); mem.HeapLimit > 0 {
				debug.SetMemoryLimit(mem.HeapLimit)
			}
			ctx := cmd.Context()
			go server.ReturnIdleMemory(ctx, cfg.IdleMemoryReturn, logger)
			srv, err := server.Start(ctx, cfg, logger)
			if err != nil {
				return err
			}
			if readyFile != "" {
				if err := writeReadyFile(readyFile, srv.Addr(), srv.AdminAddr(), srv.RegistryAddr()); err != nil {
					srv.Close()
					return fmt.Errorf("ready-file: %w", err)
				}
			}
			<-ctx.Done()
			logger.Info("shutting down")
			return srv.Close()
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "YAML config file (flags and SLUICE_* env override it)")
	cmd.Flags().StringVar(&readyFile, "ready-file", "", "once ready, write the bound Kafka address to this file (then \"admin ADDR\" and \"registry ADDR\" lines for the admin and schema registry listeners that are on)")
	def := config.Default()
	for i, f := range flagKeys {
		cmd.Flags().StringVar(&vals[i], f.flag, defaultString(def, f.key), f.usage)
	}
	return cmd
}

func defaultString(c config.Config, key string) string {
	switch key {
	case "listen":
		return c.Listen
	case "data_dir":
		return c.DataDir
	case "flush.mode":
		return c.Flush.Mode
	case "log_level":
		return c.LogLevel
	case "s3.addressing":
		return c.S3.Addressing
	case "etcd.prefix":
		return c.Etcd.Prefix
	case "cluster.lease_ttl":
		return c.Cluster.LeaseTTL.String()
	case "cluster.orphan_grace":
		return c.Cluster.OrphanGrace.String()
	}
	return ""
}

func newLogger(cfg config.Config) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel)))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// writeReadyFile writes the bound Kafka address on the first line, then
// "admin ADDR" when the admin listener is on and "registry ADDR" when the
// schema registry is. It writes a temporary file and renames it, so that a
// reader never sees half of it.
func writeReadyFile(path, kafka, admin, registry string) error {
	body := kafka + "\n"
	if admin != "" {
		body += "admin " + admin + "\n"
	}
	if registry != "" {
		body += "registry " + registry + "\n"
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
