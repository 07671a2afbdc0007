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
// Tasks are assigned cooperatively (only moved tasks are revoked), restored
// on their own goroutine while their partitions are paused, and may have
// standby replicas that tail their changelogs on other instances.
//
// Locks: App.mu guards the task maps and every task's state; it is taken
// by the poll loop around processing and commits, by the rebalance
// callbacks, and by a restore goroutine to hand its task over.
// standbys.mu guards the standby tasks; it is taken by the standby fetch
// loop, by reconcile and by release. copartitionBalancer.mu guards the
// last assignment's owners and standbys. No two of them are ever held
// together. task.mu guards only what produce promises set.
package streams
