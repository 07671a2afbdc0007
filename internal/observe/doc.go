// Package observe keeps the broker's traffic metrics and exports them to
// Prometheus in three groups (docs/metrics.md):
//
//   - producer: records and bytes produced per topic, Produce latency per
//     acks level, partition errors by Kafka error code;
//   - storage: bytes and offsets retained per topic, the data directory's
//     disk space;
//   - consumer: records and bytes fetched per topic, and per group where
//     the group can be inferred, rebalances per group.
//
// Per-topic figures are summed at scrape time from counters that hang off
// each partition handle (log.Traffic), so the produce and fetch paths add
// to two atomics per partition and take no lock and look up no map; a
// custom prometheus.Collector walks the topics when scraped. Per-partition
// series exist only for the Config.TopPartitions partitions with the most
// traffic since the previous scrape, so that 100,000 partitions keep
// /metrics small.
//
// Fetch requests name no group. A client's fetches are counted for the
// group its last JoinGroup, SyncGroup, Heartbeat, ConsumerGroupHeartbeat
// or OffsetCommit named, matched by (client id, host) as Kafka identifies
// a member: an approximation, documented in docs/metrics.md.
//
// It does not own the request counters and latencies of every API
// (internal/kafka), the log's WAL and object metrics (internal/log), the
// object store's (internal/objstore.Metered), consumer lag
// (internal/lag) or the HTTP listener (internal/server).
package observe
