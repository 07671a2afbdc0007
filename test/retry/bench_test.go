package retry

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// BenchmarkNoopHandler64Keys reads the same records, 64 keys over 8
// partitions, with a plain kgo group consumer and with pkg/consumer running
// a no-op handler, in the same run against the same in-process broker, and
// reports both rates and their ratio (library / kgo). SLUICE_BENCH_RECORDS
// sets the count (default 1,000,000). SLUICE_BENCH_ONLY=kgo or =lib runs
// one side only, for a CPU profile of it (the ratios are then 1). The
// process CPU (user+system, the in-process broker's serving included, the
// same work for both) is reported per record as the median over the pairs
// for each side, and their ratio (median-cpu-ratio, kgo / library).
//
//	go test ./test/retry -run '^$' -bench NoopHandler64Keys -benchtime 3x
func BenchmarkNoopHandler64Keys(b *testing.B) {
	n := 1_000_000
	if v := envInt("SLUICE_BENCH_RECORDS"); v > 0 {
		n = v
	}
	br := testbroker.Start(b, testbroker.WithFlush("os"))
	topic := unique("bench")
	testbroker.CreateTopic(b, br.Addr(), topic, 8, nil)
	cl := testbroker.NewClient(b, br.Addr(), kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	value := make([]byte, 100)
	for i := 0; i < n; {
		var recs []*kgo.Record
		for j := 0; j < 10_000 && i < n; j, i = j+1, i+1 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%02d", i%64)), Value: value})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var kgoRate, libRate float64
	var kgoCPU, libCPU time.Duration
	var pairRatios, kgoCPUs, libCPUs []float64
	b.Logf("load average at the start: %s", loadAvg())
	for i := 0; i < b.N; i++ {
		// Alternate who goes first, and start each from a collected heap.
		var dk, dl, ck, cl time.Duration
		runKgo := func() {
			runtime.GC()
			c0 := cpuTime()
			dk = plainKgo(b, br.Addr(), topic, n)
			ck = cpuTime() - c0
		}
		runLib := func() {
			runtime.GC()
			c0 := cpuTime()
			dl = library(b, br.Addr(), topic, n)
			cl = cpuTime() - c0
		}
		if only := os.Getenv("SLUICE_BENCH_ONLY"); only != "" {
			if only == "kgo" {
				runKgo()
				dl, cl = dk, ck
			} else {
				runLib()
				dk, ck = dl, cl
			}
		} else if i%2 == 0 {
			runKgo()
			runLib()
		} else {
			runLib()
			runKgo()
		}
		kgoCPU += ck
		libCPU += cl
		kgoCPUs = append(kgoCPUs, ck.Seconds()*1e9/float64(n))
		libCPUs = append(libCPUs, cl.Seconds()*1e9/float64(n))
		pairRatios = append(pairRatios, dk.Seconds()/dl.Seconds())
		b.Logf("%d records: kgo %v (process CPU %v), library %v (process CPU %v), ratio %.2f", n, dk, ck, dl, cl, dk.Seconds()/dl.Seconds())
		kgoRate += float64(n) / dk.Seconds()
		libRate += float64(n) / dl.Seconds()
	}
	b.ReportMetric(kgoRate/float64(b.N), "kgo-records/s")
	b.ReportMetric(libRate/float64(b.N), "lib-records/s")
	b.ReportMetric(libRate/kgoRate, "ratio")
	slices.Sort(pairRatios)
	b.ReportMetric(pairRatios[len(pairRatios)/2], "median-pair-ratio")
	// Process CPU (broker included, so the same serving cost is in both):
	// less sensitive to other load on the machine than wall time.
	b.ReportMetric(kgoCPU.Seconds()/libCPU.Seconds(), "cpu-ratio")
	// Medians of the process CPU per record of each side: one pair that a
	// neighbour's burst lands in moves them less than the sums above.
	slices.Sort(kgoCPUs)
	slices.Sort(libCPUs)
	mk, ml := kgoCPUs[len(kgoCPUs)/2], libCPUs[len(libCPUs)/2]
	b.ReportMetric(mk, "kgo-cpu-ns/record")
	b.ReportMetric(ml, "lib-cpu-ns/record")
	b.ReportMetric(mk/ml, "median-cpu-ratio")
	b.Logf("load average at the end: %s", loadAvg())
}

// loadAvg is the machine's load averages (1, 5, 15 min), for the log.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInt(name string) int {
	var v int
	fmt.Sscan(os.Getenv(name), &v)
	return v
}

// assignedAt is a kgo option that notes when the group assigned the
// partitions: both consumers are timed from there to their last record, so
// the group join is not in the figure but every fetch is.
func assignedAt(at *atomic.Int64) kgo.Opt {
	return kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
		at.CompareAndSwap(0, time.Now().UnixNano())
	})
}

// plainKgo reads n records with a kgo group consumer that commits what it
// polled, as a plain at-least-once kgo loop does.
func plainKgo(b *testing.B, addr, topic string, n int) time.Duration {
	var began atomic.Int64
	cl := testbroker.NewClient(b, addr, kgo.ConsumerGroup(unique("kgo")), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), assignedAt(&began))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollRecords(ctx, 10_000)
		if ctx.Err() != nil {
			b.Fatalf("kgo: %d of %d records", got, n)
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(time.Unix(0, began.Load()))
}

// library reads n records with pkg/consumer and a no-op handler.
func library(b *testing.B, addr, topic string, n int) time.Duration {
	var got, began atomic.Int64
	done := make(chan struct{})
	h := func(context.Context, *kgo.Record) error {
		if got.Add(1) == int64(n) {
			close(done)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := consumer.New(ctx, h, consumer.Brokers(addr), consumer.Group(unique("lib")), consumer.Topics(topic),
		consumer.CommitInterval(time.Second), consumer.ClientOpts(assignedAt(&began)))
	if err != nil {
		b.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("library: %d of %d records", got.Load(), n)
	}
	d := time.Since(time.Unix(0, began.Load()))
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return d
}
