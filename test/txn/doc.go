// Package txn tests transactions end to end against a real broker: franz-go
// and confluent-kafka-python transactional producers committing and
// aborting, read_committed consumers, consume-transform-produce with
// GroupTransactSession, and broker restarts in the middle of transactions.
package txn
