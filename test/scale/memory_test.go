package scale

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// rssKB reads a /proc/PID/status field in kB (VmRSS, VmHWM).
func rssKB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the broker's memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestMemoryBudgetManyPartitions: with --memory-budget-mb 512, one
// idempotent producer writing 100-byte records to random partitions of a
// 20,000-partition topic (every record its own batch, the shape that made
// the broker's memory grow with the partition count), then a consumer
// reading it all back, leave the broker's peak resident memory within the
// budget plus 10 %.
func TestMemoryBudgetManyPartitions(t *testing.T) {
	const budgetMB, partitions, records = 512, 20000, 1000000
	budgetFlag := budgetMB
	if v := os.Getenv("SLUICE_SCALE_BUDGET_FLAG"); v != "" { // to see what the broker takes unbudgeted
		budgetFlag, _ = strconv.Atoi(v)
	}
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, "--memory-budget-mb", strconv.Itoa(budgetFlag), "--log-level", "warn")
	testbroker.CreateTopic(t, p.Addr(), "wide", partitions, nil)

	cl := testbroker.NewClient(t, p.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.DefaultProduceTopic("wide"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	stop := make(chan struct{})
	var peak atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if v := rssKB(t, p.Pid(), "VmRSS"); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 100)
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := 0; i < records; i++ {
		r := &kgo.Record{Partition: rng.Int32N(partitions), Value: value}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	// Read it all back: fetches over every partition at once are the
	// other half of the load.
	cons := testbroker.NewClient(t, p.Addr(), kgo.ConsumeTopics("wide"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < records; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, records, err)
		}
		fs.EachError(func(topic string, part int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, part, err) })
		got += fs.NumRecords()
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d records failed, first: %v", n, records, firstErr.Load())
	}
	hwm := rssKB(t, p.Pid(), "VmHWM")
	limit := int64(budgetMB) * 1024 * 11 / 10
	t.Logf("budget %d MiB: peak RSS sampled %d MiB, VmHWM %d MiB (bound %d MiB)", budgetMB, peak.Load()>>10, hwm>>10, limit>>10)
	if hwm > limit {
		t.Fatalf("the broker's peak resident memory %d MiB exceeds its %d MiB budget plus 10 %%", hwm>>10, budgetMB)
	}
}

// TestIdleMemoryReturned: after a burst that leaves the heap far larger
// than what stays live (creating 20,000 partitions, then writing 300,000
// records over them), a broker gone quiet gives its free heap back to the
// system instead of keeping it.
func TestIdleMemoryReturned(t *testing.T) {
	const partitions, records = 20000, 300000
	bin := testbroker.BuildBinary(t)
	admin := testbroker.FreeAddr(t)
	p := testbroker.StartProcess(t, bin, "--idle-memory-return", "1s", "--admin-listen", admin, "--log-level", "warn")
	testbroker.CreateTopic(t, p.Addr(), "burst", partitions, nil)
	cl := testbroker.NewClient(t, p.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.DefaultProduceTopic("burst"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(3, 4))
	value := make([]byte, 100)
	for i := 0; i < records; i++ {
		cl.Produce(ctx, &kgo.Record{Partition: rng.Int32N(partitions), Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	cl.Close()
	// The heap the runtime holds is what it uses plus what it keeps free;
	// once quiet, that falls to at most half its peak (a collection ran
	// and the free pages went back). Without the return, no collection
	// runs in a quiet process and the garbage stays in use.
	peak := uint64(0)
	// Background work after the burst (rolling it, then merging the
	// 20,000 partitions' small extents into packed objects) allocates
	// too, so the broker is quiet only once that is done: seconds alone,
	// a minute or more on a machine busy with other tests.
	const quietWithin = 240 * time.Second
	deadline := time.Now().Add(quietWithin)
	for {
		m := scrapeMetrics(t, admin)
		held := m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"] + m["go_memstats_heap_inuse_bytes"]
		peak = max(peak, held)
		if held <= peak/2 {
			t.Logf("heap held: %d MiB at most, %d MiB once quiet (RSS %d MiB)", peak>>20, held>>20, rssKB(t, p.Pid(), "VmRSS")>>10)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the burst the runtime still holds %d MiB of heap (peak %d MiB)", quietWithin, held>>20, peak>>20)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrapeMetrics reads the gauges of the broker's /metrics.
func scrapeMetrics(t *testing.T, addr string) map[string]uint64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil && v >= 0 {
			out[f[0]] = uint64(v)
		}
	}
	return out
}
