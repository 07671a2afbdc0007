// Package bench is sluice's load driver: the code behind `sluice bench`.
//
// It owns the workload (produce N records of S bytes over P partitions with
// franz-go, then consume them back from where production began), the
// measurements (throughput, per-record produce latency in an HDR histogram,
// optional open-loop rate limiting), the report (text and JSON), the
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
// Units: MB is 10^6 bytes, MiB is 2^20 bytes. Throughput counts record value
// bytes only (no keys, headers or protocol overhead).
package bench
