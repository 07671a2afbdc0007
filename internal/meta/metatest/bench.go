package metatest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Bench runs the shared benchmarks. newStore must return a fresh, empty
// store; Bench closes it. Each benchmark reports allocations and, where it
// runs serially, p50/p99 latency.
func Bench(b *testing.B, newStore func(b *testing.B) meta.Store) {
	b.Run("Get", func(b *testing.B) { benchGet(b, newStore(b)) })
	b.Run("List100", func(b *testing.B) { benchList(b, newStore(b)) })
	b.Run("Put", func(b *testing.B) { benchPut(b, newStore(b)) })
	b.Run("CAS", func(b *testing.B) { benchCAS(b, newStore(b)) })
	b.Run("TxnMaxOps", func(b *testing.B) { benchTxnMaxOps(b, newStore(b)) })
	b.Run("PutParallel", func(b *testing.B) { benchPutParallel(b, newStore(b)) })
}

var value = make([]byte, 128)

func fill(b *testing.B, s meta.Store, prefix string, n int) {
	b.Helper()
	for start := 0; start < n; start += meta.MaxTxnOps {
		var ops []meta.Op
		for i := start; i < min(start+meta.MaxTxnOps, n); i++ {
			ops = append(ops, meta.Put(fmt.Sprintf("%s%06d", prefix, i), value))
		}
		if err := s.Txn(context.Background(), nil, ops...); err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
}

// timed runs op b.N times, recording each latency, and reports p50/p99.
func timed(b *testing.B, op func(i int) error) {
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}

func benchGet(b *testing.B, s meta.Store) {
	defer s.Close()
	const keys = 10_000
	fill(b, s, "g/", keys)
	ctx := context.Background()
	timed(b, func(i int) error {
		_, err := s.Get(ctx, fmt.Sprintf("g/%06d", i*7919%keys))
		return err
	})
}

func benchList(b *testing.B, s meta.Store) {
	defer s.Close()
	ctx := context.Background()
	for p := range 20 {
		fill(b, s, fmt.Sprintf("l/%02d/", p), 100)
	}
	timed(b, func(i int) error {
		kvs, err := s.List(ctx, fmt.Sprintf("l/%02d/", i%20))
		if err == nil && len(kvs) != 100 {
			err = fmt.Errorf("List returned %d keys, want 100", len(kvs))
		}
		return err
	})
}

// benchPut is one durable single-key write per op.
func benchPut(b *testing.B, s meta.Store) {
	defer s.Close()
	ctx := context.Background()
	timed(b, func(i int) error {
		return s.Txn(ctx, nil, meta.Put(fmt.Sprintf("p/%09d", i), value))
	})
}

// benchCAS is the hot path of leases and offset commits: compare one
// version, write the next.
func benchCAS(b *testing.B, s meta.Store) {
	defer s.Close()
	ctx := context.Background()
	timed(b, func(i int) error {
		return s.Txn(ctx, []meta.Compare{{Key: "cas", Version: int64(i)}}, meta.Put("cas", value))
	})
}

func benchTxnMaxOps(b *testing.B, s meta.Store) {
	defer s.Close()
	ctx := context.Background()
	ops := make([]meta.Op, meta.MaxTxnOps)
	timed(b, func(i int) error {
		for j := range ops {
			ops[j] = meta.Put(fmt.Sprintf("t/%04d", j), value)
		}
		return s.Txn(ctx, nil, ops...)
	})
}

func benchPutParallel(b *testing.B, s meta.Store) {
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var ids atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		me := ids.Add(1)
		for i := 0; pb.Next(); i++ {
			if err := s.Txn(ctx, nil, meta.Put(fmt.Sprintf("pp/%d/%09d", me, i), value)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
