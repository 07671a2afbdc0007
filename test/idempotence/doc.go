// Package idempotence tests idempotent producers end to end: real franz-go
// producers against the real broker, through a fault-injecting TCP proxy
// written in the tests that drops produce responses after the broker has
// processed the request (so clients retry what was already appended), and
// across a SIGKILL of the broker process. Every record must end up in the
// log exactly once, in order. Tests never assert timings.
//
// The package has no non-test code.
package idempotence
