package delay

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// The figures of docs/benchmarks.md, "Delayed delivery". Benchmarks, not
// tests: run one at a time with -benchtime=1x, e.g.
//
//	go test -run XXX -bench BenchmarkDelayLateness -benchtime=1x ./test/delay/
//	SLUICE_DELAY_PENDING=10000000 go test -run XXX -bench BenchmarkDelayPending -benchtime=1x -timeout 1h ./test/delay/

// BenchmarkDelayLateness produces N records due in the same second
// (sluice-deliver-at, one value for all) and reports delivery lateness as
// a consumer sees it: the time the consumer got each record minus its due
// time (so consumer fetch latency is included).
func BenchmarkDelayLateness(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			br := testbroker.Start(b, testbroker.WithConfig(func(c *config.Config) { c.LogLevel = "info" }))
			topic := "lateness"
			testbroker.CreateTopic(b, br.Addr(), topic, 8, nil)
			c := consume(b, br.Addr(), topic)
			cl := testbroker.NewClient(b, br.Addr(), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
			lead := 3*time.Second + time.Duration(n/10_000)*time.Second
			due := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
			at := []byte(strconv.FormatInt(due.UnixMilli(), 10))
			ctx := context.Background()
			var wg sync.WaitGroup
			var firstErr error
			var mu sync.Mutex
			began := time.Now()
			for i := range n {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("r" + strconv.Itoa(i)),
					Headers: []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: at}}}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			if time.Now().After(due) {
				b.Fatalf("producing %d took %v, past the due time", n, time.Since(began))
			}
			b.Logf("produced %d in %v; due at %s", n, time.Since(began), due.Format(time.RFC3339))
			testbroker.Eventually(b, 2*time.Minute, "all delivered", func() error {
				if k := c.count(); k < n {
					return fmt.Errorf("%d of %d", k, n)
				}
				return nil
			})
			var late []time.Duration
			c.mu.Lock()
			for _, s := range c.recs {
				late = append(late, s[0].at.Sub(due))
			}
			c.mu.Unlock()
			slices.Sort(late)
			p50, p99, mx := late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
			b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
			b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
			b.ReportMetric(float64(mx.Milliseconds()), "max-ms")
			b.Logf("%d due at once: lateness p50 %v p99 %v max %v (min %v)", n, p50, p99, mx, late[0])
		})
	}
}

// BenchmarkDelayPending holds SLUICE_DELAY_PENDING records (default
// 1,000,000) for a day in the real binary and reports the broker's RSS
// before and after; then it SIGKILLs and restarts it and reports how long
// from the restart until records that fell due meanwhile are delivered.
// With SLUICE_DELAY_BASELINE=1 the same records are produced with a header
// that asks for nothing, for the RSS the log itself costs.
func BenchmarkDelayPending(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("SLUICE_DELAY_PENDING"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	bin := testbroker.BuildBinary(b)
	// SLUICE_DELAY_COMPACT_LAG (a duration, e.g. 1s) lowers the store's
	// min.compaction.lag.ms so that its compaction runs while the records
	// are pending; the broker's RSS is then sampled until it is done.
	lag := os.Getenv("SLUICE_DELAY_COMPACT_LAG")
	// SLUICE_DELAY_PROFILE=dir saves the broker's heap profile and Go
	// memory figures at the end of the burst (where the extra RSS is).
	profDir := os.Getenv("SLUICE_DELAY_PROFILE")
	if lag != "" {
		b.Setenv("SLUICE_DELAY_STORE_MIN_COMPACTION_LAG", lag)
	}
	p := testbroker.StartProcess(b, bin, "--log-level", "info")
	metrics := p.AdminAddr()
	const topic = "pending"
	testbroker.CreateTopic(b, p.Addr(), topic, 8, nil)
	// A first delayed record so that the store exists and is loaded.
	cl := testbroker.NewClient(b, p.Addr(), kgo.ProducerLinger(10*time.Millisecond), kgo.MaxBufferedRecords(200_000),
		kgo.ProducerBatchMaxBytes(1<<20))
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x"),
		Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte("1")}}}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	before, err := testbroker.ReadMemory(p.Pid())
	if err != nil {
		b.Fatal(err)
	}
	day := []byte(strconv.FormatInt((24 * time.Hour).Milliseconds(), 10))
	hdrs := []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: day}}
	baseline := os.Getenv("SLUICE_DELAY_BASELINE") == "1"
	if baseline {
		// The same records with a header of the same size that asks for
		// nothing: what the broker costs without holding them.
		hdrs = []kgo.RecordHeader{{Key: "sluice-delay-xx", Value: day}}
	}
	began := time.Now()
	var wg sync.WaitGroup
	var failed sync.Once
	var ferr error
	val := make([]byte, 100)
	// SLUICE_DELAY_RANDOM=1: random values, which the producer's snappy
	// does not shrink (zero-filled ones it shrinks about tenfold, the
	// delay store keeps entries uncompressed).
	random := os.Getenv("SLUICE_DELAY_RANDOM") == "1"
	rng := mrand.New(mrand.NewPCG(1, 2))
	for i := range n {
		wg.Add(1)
		if random {
			val = make([]byte, 100)
			for j := 0; j+8 <= len(val); j += 8 {
				binary.LittleEndian.PutUint64(val[j:], rng.Uint64())
			}
			binary.LittleEndian.PutUint32(val[96:], rng.Uint32())
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: val, Key: []byte(strconv.Itoa(i)),
			Headers: hdrs}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Do(func() { ferr = err })
			}
			wg.Done()
		})
	}
	wg.Wait()
	if ferr != nil {
		b.Fatal(ferr)
	}
	took := time.Since(began)
	b.Logf("held %d records (100-byte values) in %v: %.0f records/s", n, took, float64(n)/took.Seconds())
	time.Sleep(5 * time.Second)
	after, err := testbroker.ReadMemory(p.Pid())
	if err != nil {
		b.Fatal(err)
	}
	extra := after.RSS - before.RSS
	b.Logf("RSS %d MiB before, %d MiB with %d pending: %d MiB extra (%.1f bytes a record); anon %d MiB, peak RSS %d MiB",
		before.RSS>>20, after.RSS>>20, n, extra>>20, float64(extra)/float64(n), after.Anon>>20, after.HWM>>20)
	b.ReportMetric(float64(extra>>20), "extra-RSS-MiB")
	if profDir != "" {
		saveMemory(b, metrics, profDir, baseline)
	}
	// Settled: past the broker's idle memory return (a check every 30 s
	// by default; the first check after the burst still sees its
	// allocations, the second finds the broker quiet), the burst's free
	// heap is given back; what stays is what the pending records cost
	// while they wait. (Not with SLUICE_DELAY_COMPACT_LAG: its compaction
	// may run by then.)
	if lag == "" {
		time.Sleep(time.Until(began.Add(took + 70*time.Second)))
		settled, err := testbroker.ReadMemory(p.Pid())
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("RSS 70 s after the burst: %d MiB: %d MiB extra; anon %d MiB", settled.RSS>>20, (settled.RSS-before.RSS)>>20, settled.Anon>>20)
		b.ReportMetric(float64((settled.RSS-before.RSS)>>20), "settled-extra-RSS-MiB")
	}
	if baseline {
		return
	}
	if lag != "" {
		watchCompaction(b, p.Pid(), metrics, before.RSS)
	}

	// Records due 3 s from now; the broker is killed at once and restarted.
	due := time.Now().Add(3 * time.Second)
	at := []byte(strconv.FormatInt(due.UnixMilli(), 10))
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("due-" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: at}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	p.Kill()
	time.Sleep(time.Until(due))
	restarted := time.Now()
	p.Restart()
	ready := time.Since(restarted)
	c := consume(b, p.Addr(), topic)
	testbroker.Eventually(b, 10*time.Minute, "due records delivered after the restart", func() error {
		for i := range 100 {
			if len(c.get("due-"+strconv.Itoa(i))) == 0 {
				return fmt.Errorf("due-%d not yet", i)
			}
		}
		return nil
	})
	resumed := time.Since(restarted)
	b.Logf("restart with %d pending: ready in %v, due records delivered %v after the restart", n, ready, resumed)
	b.ReportMetric(resumed.Seconds(), "resume-s")
	after2, _ := testbroker.ReadMemory(p.Pid())
	b.Logf("RSS after the restart: %d MiB", after2.RSS>>20)
}

// watchCompaction samples the broker's RSS every 250 ms until the delay
// store's compaction is done (at least one compaction per store
// partition, none due, and no new one for 45 s: three cleaner backoffs),
// logging it every 10 s and at each compaction, and reports the peak and
// what is left. With a lag longer than the burst (e.g. 90s), the first
// samples are the pending records alone, before any compaction.
func watchCompaction(b *testing.B, pid int, metrics string, idle int64) {
	began := time.Now()
	var peak, peakAnon int64
	// peakIn is the peak from the first compaction's end on: the heap
	// the burst left behind has been collected or returned by then (the
	// first pass's own peak is missed, the later ones are alike).
	var peakIn int64
	var last float64
	lastChange := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		m, err := testbroker.ReadMemory(pid)
		if err != nil {
			b.Fatal(err)
		}
		peak, peakAnon = max(peak, m.RSS), max(peakAnon, m.Anon)
		if last > 0 {
			peakIn = max(peakIn, m.RSS)
		}
		if i%4 == 0 {
			vals, err := scrape(metrics, "sluice_log_compactions_total", "sluice_log_compaction_partitions_due")
			if err != nil {
				b.Fatal(err)
			}
			n, due := vals[0], vals[1]
			if n != last || i%40 == 0 {
				if n != last {
					last, lastChange = n, time.Now()
				}
				b.Logf("%v: %.0f compactions, %.0f partitions due, RSS %d MiB (anon %d MiB)",
					time.Since(began).Round(time.Second), n, due, m.RSS>>20, m.Anon>>20)
			}
			if n >= 8 && due == 0 && time.Since(lastChange) > 45*time.Second {
				break
			}
			if time.Since(began) > 45*time.Minute {
				b.Fatalf("compaction not done after 45 minutes: %.0f compactions, %.0f due", n, due)
			}
		}
		<-tick.C
	}
	after, err := testbroker.ReadMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("store compaction: %.0f compactions done %v after the burst; RSS peak %d MiB (anon %d MiB), %d MiB extra over idle; from the first compaction on %d MiB; after %d MiB (%d MiB extra); VmHWM %d MiB",
		last, lastChange.Sub(began).Round(time.Second), peak>>20, peakAnon>>20, (peak-idle)>>20, peakIn>>20, after.RSS>>20, (after.RSS-idle)>>20, after.HWM>>20)
	b.ReportMetric(float64((peak-idle)>>20), "compaction-peak-extra-RSS-MiB")
	b.ReportMetric(float64(peakIn>>20), "compacting-peak-RSS-MiB")
	b.ReportMetric(float64((after.RSS-idle)>>20), "after-compaction-extra-RSS-MiB")
}

// saveMemory logs the broker's Go memory figures and saves its heap
// profile (live objects by allocation site, as of the last collection) in
// dir, then the same after a forced collection.
func saveMemory(b *testing.B, metrics, dir string, baseline bool) {
	name := "delayed"
	if baseline {
		name = "baseline"
	}
	names := []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
		"go_memstats_next_gc_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_gc_gogc_percent",
		"go_gc_gomemlimit_bytes"}
	for _, gc := range []string{"0", "1"} {
		vals, err := scrape(metrics, names...)
		if err != nil {
			b.Fatal(err)
		}
		var sb strings.Builder
		for i, n := range names {
			if strings.HasSuffix(n, "_percent") {
				fmt.Fprintf(&sb, " %s=%.0f", strings.TrimPrefix(n, "go_"), vals[i])
				continue
			}
			fmt.Fprintf(&sb, " %s=%.0fMiB", strings.TrimSuffix(strings.TrimPrefix(n, "go_"), "_bytes"), vals[i]/(1<<20))
		}
		b.Logf("%s (gc=%s):%s", name, gc, sb.String())
		resp, err := http.Get("http://" + metrics + "/debug/pprof/heap?gc=" + gc)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(fmt.Sprintf("%s/%s-heap-gc%s.pprof", dir, name, gc), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// scrape reads the values of unlabelled metrics from a /metrics page.
func scrape(addr string, names ...string) ([]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(names))
	for _, line := range strings.Split(string(body), "\n") {
		for i, n := range names {
			if v, ok := strings.CutPrefix(line, n+" "); ok {
				if out[i], err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
					return nil, fmt.Errorf("metric %s: %v", n, err)
				}
			}
		}
	}
	return out, nil
}
