// Package crash runs the real sluice binary and hurts it: SIGKILL in the
// middle of acknowledged produce load, then restart on the same data
// directory and check that nothing acknowledged is lost or changed. It also
// checks retention and compaction on a running process, where segments roll
// for real. Tests poll with generous deadlines and never assert timings.
//
// The package has no non-test code.
package crash
