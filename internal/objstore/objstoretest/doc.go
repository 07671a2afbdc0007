// Package objstoretest is the shared behaviour suite and benchmark set that
// every objstore.Storage backend runs: localfs now, S3 later. A backend's test
// file calls Run (and, from a benchmark, Bench) with a factory that returns a
// fresh, empty store.
//
// The suite owns the contract's observable behaviour: sizes and ranged reads,
// atomic overwrite, idempotent delete, sorted prefix listing, concurrency,
// large streamed objects, context cancellation and (with WithReopen)
// persistence. It uses only keys valid for every backend: no key is also a
// directory prefix of another key, since localfs stores objects as files.
// Backend-specific behaviour (key validation, crash cleanup, disk full) is
// tested in the backend's own package.
package objstoretest
