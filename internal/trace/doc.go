// Package trace finds records and tells their story: where they are
// (partition, offset, timestamp), who produced them as the broker saw it
// (client id, principal, producer id and epoch, transactional id: the
// producer id is in the batch, the rest was recorded at InitProducerID by
// internal/lineage), whether their transaction committed or aborted, which
// groups have committed past them, and their retry and dead-letter hops
// (the sluice-original-* headers of docs/retries.md).
//
// A lookup by key or header scans the topic's partitions in parallel, but
// only the offsets between --from and --to when a time range is given
// (found with the time index, log.Partition.OffsetForTimestamp), and never
// more than Query.MaxScanBytes. Records without an idempotent or
// transactional producer carry no producer id; for them the producer is
// unknown (the lineage lists the client ids that produce to the topic).
//
// internal/server mounts Handler on the admin listener; `sluice trace`
// reads it (docs/trace.md).
package trace
