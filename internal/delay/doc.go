// Package delay is sluice's delayed delivery: a record produced with the
// header sluice-deliver-at (Unix epoch ms) or sluice-delay-ms is held back
// and appended to its partition once due.
//
// It owns the produce-side split of a batch into the records appended now
// and the records held (Service.Hold), the delay store, the timing wheel
// over it, and delivery. The store is the log itself: the compacted
// internal topic __sluice_delay, whose partition abs(fnv32a(topic)+p) % n
// holds the pending records of topic-partition p. Each partition is run by
// one worker (partition.go) that replays it on start, keeps the entries due
// within its horizon in a hierarchical timing wheel (wheel.go) and the rest
// in the log only, and delivers due entries exactly once: a marker naming
// the entries and the sequence numbers they get in the target partition is
// made durable first, then the entries are appended with a producer id of
// the store partition's own (ProducerIDBase + partition), then tombstoned;
// after a crash the last marker's batch is sent again with the same
// sequence numbers and the target partition's idempotence drops it if it
// was already there. See docs/delayed-delivery.md for the formats.
//
// Records held in a transaction are written to the store in the
// producer's transaction (txn.go): the store partition joins it, and the
// worker reads its store as a read_committed consumer, indexing an entry
// only once its transaction committed. Stats answer from a per-topic
// summary kept in memory (summary.go), and cancel by offset finds entries
// beyond the horizon through per-target spans of store offsets (spans.go).
//
// It does not own the wire protocol (internal/kafka calls Hold on the
// log's ErrDelayed), record validation (internal/log/batch detects the
// headers during the walk it does anyway) or the log.
//
// Locks: Service.mu (the worker map) before part.mu (one store
// partition's index, summary, spans and pending transactions). part.mu is
// never held across an append or a read. part.txnMu (appendTxn) is held
// across one transactional store append, never with part.mu held.
package delay
