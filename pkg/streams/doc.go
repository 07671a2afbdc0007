// Package streams is a Kafka-Streams-like stream processing library for Go,
// built on franz-go and usable against any Kafka-compatible broker. It
// imports nothing of sluice's broker.
//
// A Builder describes a topology with typed operators: Stream sources a
// topic; KStream's methods (Filter, Peek, Merge, Branch, To) keep the types,
// package functions (Map, MapValues, FlatMap, SelectKey, GroupBy,
// GroupByKey, Count, Reduce, Aggregate, WindowedBy, WindowedAggregate,
// SlidingWindowedBy, SessionWindowedBy, the joins, Deduplicate) change
// them, because Go methods cannot take type parameters. Tables join
// streams (JoinTable), tables (JoinTables) and global tables
// (GlobalTable, JoinGlobal), which every instance reads in full on a
// goroutine of its own (global.go). Avro, Protobuf and JSON Schema serdes
// go through a schema registry (registry.go).
//
// At run time (App) the work is cut into tasks, one per partition of each
// source topic. A task owns the state stores its records reach: one Pebble
// database per task, each store with a compacted changelog topic
// ("<app>-<store>-changelog", partition = the task's partition). Store
// writes stay in an in-memory overlay until the commit that publishes their
// changelog records succeeds; only then are they written to Pebble with the
// changelog offset as a checkpoint, so the local database never holds
// uncommitted state and a task opening on a disk that already has the store
// restores only the changelog tail past the checkpoint.
//
// With ExactlyOnce (the default) an App commits, once per commit interval,
// one transaction that holds its tasks' output records, repartition
// records, changelog records and input offsets (franz-go's
// GroupTransactSession, KIP-447); an aborted transaction drops the overlays
// and the consumer rewinds to the committed offsets. With AtLeastOnce the
// same steps run without a transaction.
//
// TestDriver runs a topology without a broker for unit tests.
//
// Locks: App.mu guards the task map and every task's state; it is taken by
// the poll loop around processing and commits, and by the rebalance
// callbacks. There is no other lock.
package streams
