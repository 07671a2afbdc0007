package scale

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
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
// records over them), a broker gone quiet gives the free memory back to
// the system instead of holding its peak.
func TestIdleMemoryReturned(t *testing.T) {
	const partitions, records = 20000, 300000
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, "--idle-memory-return", "1s", "--log-level", "warn")
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
	peak := rssKB(t, p.Pid(), "VmHWM")
	// Quiet now: within a few checks the free heap goes back.
	deadline := time.Now().Add(time.Minute)
	for {
		rss := rssKB(t, p.Pid(), "VmRSS")
		if rss < peak/2 {
			t.Logf("peak %d MiB, %d MiB once quiet", peak>>10, rss>>10)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the burst the broker still holds %d MiB of its %d MiB peak", rss>>10, peak>>10)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
