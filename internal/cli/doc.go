// Package cli implements the user-facing command line tools of the sluice
// binary: "topic" (create, list, describe, delete, alter-config), "produce"
// (stdin lines to records), "consume" (records to stdout, as text or JSON)
// and "dlq" (list, show and replay the dead-letter topics of pkg/consumer's
// convention, docs/retries.md; replay writes each dead letter once, through
// a transaction with a marker in the compacted "<dlq>.replayed" topic)
// and "schema" (a client of any Confluent-compatible schema registry's REST
// API, through franz-go's pkg/sr: docs/schema-registry.md).
// They are meant for people without a Kafka toolbox at hand, so they speak
// plain Kafka through franz-go (kgo and kadm) and work against any
// Kafka-compatible broker, not only sluice.
//
// The package owns flag parsing for those commands, the shared client
// construction (the --brokers flag and the SLUICE_BROKERS variable), the
// kcat-like --format language and the --json record shape. It does not own
// the root command, process signals or the broker itself: cmd/sluice mounts
// [Commands] under its root and should run it with ExecuteContext so that
// Ctrl-C cancels a "consume --follow" cleanly.
//
// Everything is written to cmd.OutOrStdout (records, tables) or
// cmd.ErrOrStderr (progress such as "produced N records"), and errors are
// returned, never printed, so tests can drive the commands in process.
package cli
