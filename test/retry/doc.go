// Package retry tests pkg/consumer and the dlq command against a real
// sluice broker over TCP: per-key order under failures, dead-letter headers,
// a consumer process SIGKILLed mid-retry (also with ExactlyOnce, checked
// read committed), exactly once through a rebalance, the dedup helper, the
// metrics, dlq replay, and the Python example of the retry convention
// (docs/retries.md), restarts included. load/ is the workload shared with
// the crashconsumer helper process. bench_test.go compares the library with
// a plain kgo consumer (docs/benchmarks.md).
package retry
