package objstoretest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// Bench runs the shared benchmarks. newStore must return a fresh, empty
// store; Bench closes it. Each benchmark reports throughput (via SetBytes),
// allocations, and p50/p99 latency.
func Bench(b *testing.B, newStore func(b *testing.B) objstore.Storage) {
	b.Run("Put1MiB", func(b *testing.B) { benchPut(b, newStore(b), 1<<20) })
	b.Run("Put64KiB", func(b *testing.B) { benchPut(b, newStore(b), 64<<10) })
	b.Run("ReadAt4KiB", func(b *testing.B) { benchReadAt(b, newStore(b), 4<<10) })
	b.Run("ReadAt4KiBParallel", func(b *testing.B) { benchReadAtParallel(b, newStore(b), 4<<10) })
	b.Run("ReadAt1MiB", func(b *testing.B) { benchReadAt(b, newStore(b), 1<<20) })
}

func benchPut(b *testing.B, s objstore.Storage, size int) {
	defer s.Close()
	ctx := context.Background()
	data := pattern(7, size)
	r := bytes.NewReader(data)
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.Reset(data)
		start := time.Now()
		if err := s.Put(ctx, fmt.Sprintf("bench/put/%09d", i), r, int64(size)); err != nil {
			b.Fatalf("Put: %v", err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// benchObject is the object ranged reads are spread over: larger than the
// reads, small enough to create quickly.
const benchObject = 32 << 20

func setupReadObject(b *testing.B, s objstore.Storage) {
	b.Helper()
	if err := s.Put(context.Background(), "bench/read", &patternReader{seed: 3, size: benchObject}, benchObject); err != nil {
		b.Fatalf("Put: %v", err)
	}
}

func benchReadAt(b *testing.B, s objstore.Storage, size int) {
	defer s.Close()
	setupReadObject(b, s)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	p := make([]byte, size)
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		off := rng.Int64N(benchObject - int64(size))
		start := time.Now()
		if err := s.ReadAt(ctx, "bench/read", p, off); err != nil {
			b.Fatalf("ReadAt: %v", err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func benchReadAtParallel(b *testing.B, s objstore.Storage, size int) {
	defer s.Close()
	setupReadObject(b, s)
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		p := make([]byte, size)
		for pb.Next() {
			if err := s.ReadAt(ctx, "bench/read", p, rng.Int64N(benchObject-int64(size))); err != nil {
				b.Errorf("ReadAt: %v", err)
				return
			}
		}
	})
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}
