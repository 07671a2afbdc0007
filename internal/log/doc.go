// Package log is sluice's storage engine: topics and partitions, the append
// path (validation, offset assignment, group-committed WAL), reads from an
// in-memory tail and from immutable data objects, the offset and time
// indexes, retention, DeleteRecords and log compaction, and the per-partition
// idempotent producer state (duplicate, sequence and epoch checks on append,
// snapshotted at roll time, rebuilt at Open), and the log side of
// transactions: markers, open transactions, the last stable offset and the
// aborted transaction index (kept and snapshotted with producer state).
//
// It owns the WAL directory, every object under the "data/" prefix of the
// object store, and the "log/" prefix of the meta store (key layout and file
// formats: docs/formats.md). It does not own the Kafka protocol, producer id
// allocation policy, the transaction coordinator (which writes markers
// through AppendControl), consumer groups, or leadership: in
// single-node mode the leader epoch is 0.
//
// Durability contract: Append with acks=-1 returns once the WAL write holding
// the batches is durable under the flush mode; acks=0/1 once it is written to
// the file (page cache). The high watermark is the durable end, and Read
// never returns data above it, so no consumer sees a record that a crash can
// take back.
//
// Lock order (outer first): Engine.adminMu, Engine.mergeMu, Engine.mu,
// Engine.rewriteMu, Partition.mu, Engine.objMu, wal.Writer.mu;
// Partition.hwMu and the block cache lock are leaves; a partition's
// read-ahead lock (partCold.ra.mu) is released before the block cache's is
// taken. mergeMu serializes
// merges of small extents; rewriteMu is held by a merge or compaction from
// checking its inputs are current until they are swapped out. The WAL
// writer goroutine calls back into partitions (advanceHW) holding no lock. Partition.producers and the cold state's txns are
// guarded by Partition.mu; the cold state's rolledProducers/rolledTxns/
// rolledUpTo and Engine.prodDirty belong to the roller goroutine, which
// takes Partition.mu only to read "deleted". The cold state (partCold) is
// allocated on first use behind an atomic pointer.
//
// Layout: engine.go (Open/Close, config), topics.go (topic admin),
// partition.go (append, HW, waits), read.go (reads, object access),
// blockcache.go (the object block cache), readahead.go (cluster mode:
// loading ahead of sequential readers, single-flight loads),
// roll.go (WAL -> objects: adopt the file on a local store, else build),
// backpressure.go (the roll queue slowing the WAL writer down),
// recover.go (startup), merge.go (single node: merging small extents;
// mergeread.go builds a merged object, mergebuild.go registers and swaps
// it), retention.go (retention, DeleteRecords, object GC), compact.go
// (cleaner: compactmap.go its key map, compactread.go its windowed reads), pace.go (the clean loop's share of time and I/O), timeindex.go (timestamp
// lookups), producer.go (idempotent producer state and its snapshots),
// txn.go (markers, LSO, aborted index, ReadCommitted),
// metastate.go (meta keys and records), metrics.go. Cluster mode:
// shared.go (acquire, release, take-over, topic watch), sharedflush.go
// (group commits to registered objects), sharedsnap.go (producer
// snapshots), sharedroll.go and sharedgc.go.
package log
