// Package consumer runs a handler over a Kafka consumer group with ordered
// retries and dead letters, against any Kafka-compatible broker. It is built
// on franz-go's kgo and imports nothing of sluice's broker.
//
// Records run concurrently across keys and strictly in order within a key
// (a key of one partition; null keys share one lane per partition). An
// offset is committed only below the lowest record not yet finished, so a
// crash re-delivers, and never skips, what was not finished: delivery is at
// least once (or, with ExactlyOnce, exactly once for everything the
// consumer writes, retry rounds included, and for what the handler passes
// to Emit; see Dedup for the handler's other effects).
//
// A failing record is retried in place (Attempts, Backoff): later records of
// its key wait. With RetryDelays it then moves to the retry topic
// ("<topic>.retry") with the broker's delay header and the convention
// headers, and later records of its key are parked behind it there, so the
// key stays in order while the main partition moves on. When the rounds are
// used up it goes to the dead-letter topic ("<topic>.dlq") with headers
// naming where it came from, the error, the attempt count and the group.
// docs/retries.md gives the topic names and headers exactly, for consumers
// in other languages.
//
// The package owns the lanes, the offset tracking, the retry, park, hold,
// done and dead-letter records and their headers, the transactions of
// ExactlyOnce, its Prometheus metrics (Metrics) and the dedup helper. It does not
// own delayed delivery (a sluice broker does it; on other brokers the
// consumer waits for HeaderDueAt itself) nor dead-letter replay (the sluice
// dlq command).
//
// Locks: Consumer.mu, then a tracker's mu; a lane's park state is touched
// only by its goroutine. Dedup has its own lock, taken with neither held.
package consumer
