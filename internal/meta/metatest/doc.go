// Package metatest is the shared behaviour suite and benchmark set that every
// meta.Store backend runs: embedded now, etcd later. A backend's test file
// calls Run (and, from a benchmark, Bench) with a factory that returns a
// fresh, empty store, plus WithReopen if the backend can be closed and opened
// again over the same data.
//
// The suite pins down the contract callers rely on: Get of a missing key,
// versions (1 on creation, +1 per put, reset by delete), compares (version 0
// means "must not exist"; on failure ErrConflict and nothing written),
// delete and delete-prefix, sorted listing with exact prefix boundaries,
// atomic multi-op transactions, etcd's refusal of transactions that put a key
// twice or put a key they delete, concurrent compare-and-swap with exactly one
// winner, context cancellation, and persistence across reopen.
package metatest
