// Package scale runs the real sluice binary with many partitions and checks
// what must not grow with them: the broker's resident memory stays within
// its configured memory budget (docs/memory.md) while one producer writes
// to 20,000 partitions at once. The full-size figures (100,000 partitions
// and more) come from `sluice bench`, not from a test.
//
// The package has no non-test code.
package scale
