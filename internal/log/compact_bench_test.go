package log

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// BenchmarkCompactHeap measures the memory of compacting one large
// partition: SLUICE_COMPACT_RECORDS records (default 1,000,000) of about
// 150 bytes (a 16-byte key, a 100-byte value, as the delay store's
// entries), rolled every 8 MiB, then one p.compact, unpaced. A goroutine
// samples the heap every 2 ms; peak-heap-MiB is the largest HeapInuse
// seen during the compaction minus the heap before it (after a GC), and
// retained-MiB what is left after it and a GC; peak-rss-MiB is the same
// for the process's resident memory (VmRSS), which also counts a key map
// kept outside the heap. Cases: every key unique (nothing dropped: the
// largest map and output), and 4 versions a key.
func BenchmarkCompactHeap(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("SLUICE_COMPACT_RECORDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	for _, versions := range []int{1, 4} {
		b.Run(fmt.Sprintf("records=%d/versions=%d", n, versions), func(b *testing.B) {
			for range b.N {
				benchCompactHeap(b, n, versions)
			}
		})
	}
}

func benchCompactHeap(b *testing.B, n, versions int) {
	b.StopTimer()
	e, _ := benchEngine(b, func(c *Config) {
		c.Flush = FlushOS
		c.CompactBytesPerSec = -1
		c.CleanerShare = 1
	})
	ctx := context.Background()
	if _, err := e.CreateTopic(ctx, "c", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}); err != nil {
		b.Fatal(err)
	}
	p, _ := e.Partition("c", 0)
	const perBatch = 1000
	val := make([]byte, 100)
	recs := make([]kmsg.Record, perBatch)
	var since int64
	var total int64
	for i := 0; i < n; i += perBatch {
		for j := range recs {
			k := (i + j) % max(1, n/versions)
			recs[j] = kmsg.Record{Key: fmt.Appendf(nil, "key-%012d", k), Value: val}
		}
		bt, err := batch.Build(0, time.Now().UnixMilli(), recs[:min(perBatch, n-i)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Append(ctx, bt, 1); err != nil {
			b.Fatal(err)
		}
		since += int64(len(bt))
		total += int64(len(bt))
		if since >= 8<<20 {
			if err := e.forceRoll(ctx); err != nil {
				b.Fatal(err)
			}
			since = 0
		}
	}
	if err := e.forceRoll(ctx); err != nil {
		b.Fatal(err)
	}
	p.mu.RLock()
	extents := len(p.extents)
	p.mu.RUnlock()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	baseRSS := selfRSS(b)
	var peak, peakRSS atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var s runtime.MemStats
		for {
			runtime.ReadMemStats(&s)
			if int64(s.HeapInuse) > peak.Load() {
				peak.Store(int64(s.HeapInuse))
			}
			if r := selfRSS(b); r > peakRSS.Load() {
				peakRSS.Store(r)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	b.StartTimer()
	due, err := p.compact(ctx, nil)
	b.StopTimer()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil || !due {
		b.Fatalf("compaction: due %v, %v", due, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grew := peak.Load() - int64(base)
	grewRSS := peakRSS.Load() - baseRSS
	left := int64(ms.HeapInuse) - int64(base)
	b.ReportMetric(float64(grew)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(left)/(1<<20), "retained-MiB")
	b.ReportMetric(float64(grewRSS)/(1<<20), "peak-rss-MiB")
	b.ReportMetric(float64(total)/(1<<20)/took.Seconds(), "MB/s")
	b.Logf("%d records, %d MiB in %d extents: compaction %v, heap %d MiB before, peak +%d MiB, +%d MiB after; RSS %d MiB before, peak +%d MiB",
		n, total>>20, extents, took.Round(time.Millisecond), base>>20, grew>>20, left>>20, baseRSS>>20, grewRSS>>20)
}

// selfRSS is this process's resident memory (VmRSS), in bytes.
func selfRSS(b *testing.B) int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0 // not Linux: peak-rss-MiB reads 0
	}
	for line := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	return 0
}
