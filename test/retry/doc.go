// Package retry tests pkg/consumer and the dlq command against a real
// sluice broker over TCP: per-key order under failures, dead-letter headers,
// a consumer process SIGKILLed mid-retry, dlq replay, and the Python
// example of the retry convention (docs/retries.md). load/ is the workload
// shared with the crashconsumer helper process.
package retry
