// Package bench is sluice's load driver: the code behind `sluice bench`.
//
// It owns the workload (produce N records of S bytes over T topics of P
// partitions with franz-go, then consume them back from where production
// began), the measurements (throughput, per-record produce latency in an HDR
// histogram, CPU time per phase, optional open-loop rate limiting), the
// report (text and JSON), the
// kfake baselines used by --target kfake, --target kfake-process and
// --compare, and a
// direct-write disk bandwidth probe (--disk-bw) so that a run can print the
// disk's ceiling next to the broker's figures.
//
// It does not own the broker: nothing here is imported by the broker, and
// kfake (franz-go's in-memory fake cluster) is only ever a comparison
// baseline started inside the bench process. It does not assert speeds;
// tests check counts and the shape of the report, never wall-clock numbers.
//
// Produce latency is measured per record, from the moment Produce is called
// to the moment its promise runs. In a closed-loop run (no --rate) that
// includes time spent waiting for room in the client's buffer, so it grows
// with the buffer: use --rate to measure latency at a given load. With --rate
// the report also carries "intended" latency, measured from the time the
// record was scheduled to be sent, which does not hide the delay of a broker
// that cannot keep up (coordinated omission).
//
// With --compare the same workload runs against --brokers first, then an
// in-process kfake, then kfake in a child process, and the report carries
// the brokers/kfake ratio for each. kfake keeps everything in memory, so the
// ratios say how the broker compares to a storage-free broker on the same
// machine in the same run, not to Kafka. In-process kfake also shares the
// driver's runtime and skips every cross-process wake-up; the child-process
// kfake pays them as the broker does, so it is the like-for-like baseline.
//
// CPU time is how the broker is judged on a small machine: records per
// second say how fast, CPU per record what it cost. Each phase (produce,
// consume) reports the user+system time of the broker (server_cpu_s and
// server_cpu_us_per_record), read from /proc/PID/stat just before and just
// after the phase, when its PID is known: --server-pid for --target brokers,
// the child's PID for --target kfake-process. /proc/PID/stat counts in 10 ms
// ticks, so short phases read coarsely; other OSes report no server CPU. The
// driver's own time (client_cpu_s, from getrusage) covers the same spans; for
// --target kfake it includes the in-process fake, and no server figure is
// reported since there is no separate server process. The driver's CPU
// matters because on 2 cores it competes with the broker for the same CPUs.
//
// --topics N reproduces many-topic workloads ("10,000 topics x 10
// partitions"): topics are created and deleted in requests of at most 1000,
// each record picks a topic at random, and all per-partition state is keyed
// by topic and partition, so 100,000 partitions cost no more per record than
// one. The franz-go producer is another matter: the first record to each
// topic copies its map of known topics (quadratic in topics per producer
// client) and forces a metadata refresh, and each produce request walks
// every partition's buffer. At 10,000 x 10 that is tens of microseconds of
// driver CPU per record, all inside the produce phase; client_cpu_s shows
// it, and more --records and a longer --linger dilute it.
//
// Units: MB is 10^6 bytes, MiB is 2^20 bytes. Throughput counts record value
// bytes only (no keys, headers or protocol overhead).
package bench
