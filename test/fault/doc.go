// Package fault is sluice's fault-injection checker: it runs real
// workloads against real broker processes (one, or three over a real etcd
// and S3 server), hurts the system in rotation, and checks what Kafka
// promises after every fault and at the end.
//
// # Workloads
//
// They run concurrently for the whole run, each on its own topic, each
// recording what the broker acknowledged:
//
//   - plain: an acks=all producer without idempotence;
//   - idempotent: an acks=all idempotent producer;
//   - txn: a transactional producer committing about two transactions in
//     three and aborting the rest, over every partition; after any error
//     it starts a new client with the same transactional id (fencing the
//     old one), as applications do;
//   - group: a consumer group member reading the idempotent producer's
//     topic and committing its offsets by hand about three times a second.
//
// # Faults
//
// Single node (TestFaultsSingleNode; the data dir on a small tmpfs):
// SIGKILL and restart; SIGKILL twice, the second time just after the
// restart; SIGSTOP for a few seconds, then SIGCONT; the disk filled until
// writes fail with ENOSPC, held full, then freed; SIGKILL on the full disk
// and restart there; hostile input. Where the tmpfs cannot be mounted
// (mounting needs CAP_SYS_ADMIN) the disk faults are skipped, saying so.
//
// Cluster (TestFaultsCluster; three brokers, lease TTL 2 s): SIGKILL a
// broker and restart it; SIGKILL two of the three at once; SIGSTOP a broker
// for three lease TTLs, then SIGCONT (it comes back as a zombie leader that
// must have been fenced); the object store killed, then restarted; the
// object store hung (SIGSTOP), then resumed; etcd stopped past every lease,
// then started; hostile input.
//
// Hostile input, sent on raw TCP connections while the workloads run:
// malformed frames (an HTTP request, a negative size, a frame too small
// for a header, an unknown API key, a garbage request body, a request cut
// short, garbage after a valid request) must close only their connection;
// a 2 GiB frame announcement must be refused; two frames announcing 90 MiB
// (under max_request_bytes) are left half sent, and the workloads must make
// progress while they hang: a slow client must not stop the broker serving
// everyone else; a batch whose attributes say gzip over a payload that is not,
// with a correct CRC, must get CORRUPT_MESSAGE, as must a batch with a
// wrong CRC; a zstd batch of a few KiB holding 64 MiB of zeros, to a topic
// with max.message.bytes 1 MiB, must get MESSAGE_TOO_LARGE, alone and four
// at once; nothing of a refused batch may be stored.
//
// # Checks
//
// After every fault, once every workload has made progress again (waited
// for with a generous deadline, the time taken logged), and at the end:
//
//   - every acknowledged record is in the log at the offset it was
//     acknowledged at, with its value, and offsets are dense (plain and
//     idempotent);
//   - the idempotent producer's log holds each record exactly once, in the
//     order produced;
//   - read_committed, every record of a committed transaction is visible
//     exactly once and no record of an aborted one is; a transaction whose
//     commit answer was lost is all visible or all hidden. The checker
//     writes a sentinel to every partition and reads up to it, so every
//     transaction ended before is decided by then;
//   - OffsetFetch returns, for every partition, at least the last offset
//     a commit was acknowledged for, and no acknowledged commit is ever
//     followed by a lower one;
//   - every broker's resident set (VmRSS and VmHWM, sampled from /proc four
//     times a second) stays within --memory-budget-mb plus 10 %, as
//     docs/memory.md promises; the peaks are logged;
//   - no broker process exited on its own, and no broker log holds a panic
//     or a Go runtime fatal error.
//
// During the disk faults produce must be refused with KAFKA_STORAGE_ERROR
// (retriable); hostile input is checked as above. At the end, after the
// producers stop, the group must consume and commit through the end of its
// topic, having been handed every acknowledged record.
//
// Errors the clients see are not failures in themselves: Kafka clients
// retry retriable errors, and a workload records only what the broker
// acknowledged. The summary at the end lists the errors each workload saw.
//
// TestCheckersCatchViolations shows that each checker can fail, by forging
// every kind of violation after a clean run.
//
// # Running
//
// The short run applies each fault once, in about a minute per test on a
// quiet two-core machine:
//
//	go test ./test/fault/ -v
//
// A soak repeats the rotation, with randomised targets and fault lengths
// and two more faults (a graceful restart, an etcd restart), until the
// duration has passed, per test:
//
//	SLUICE_FAULT_SOAK=20m go test ./test/fault/ -run TestFaultsCluster -v -timeout 60m
//
// The seed of a run's random choices is logged; SLUICE_FAULT_SEED replays
// it. The package has no non-test code.
package fault
