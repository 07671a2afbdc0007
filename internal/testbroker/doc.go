// Package testbroker starts real sluice brokers for tests: in process
// (Start) or as the real binary in a child process (BuildBinary,
// StartProcess) for tests that kill it. Brokers listen on 127.0.0.1 with an
// ephemeral port and keep their data in the test's temporary directory;
// everything is torn down by t.Cleanup.
//
// A process can also be paused (SIGSTOP) and resumed, and its memory read
// from /proc (ReadMemory), for fault tests that stall brokers and watch
// their footprint.
//
// A broker's log output goes to a file, not the test's output; when a test
// fails, the tail of that file is printed with the failure, so a red test
// shows what the broker said.
//
// It owns no broker logic and fakes nothing: tests talk to the broker with
// real Kafka clients over TCP.
package testbroker
