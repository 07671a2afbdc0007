package bench

import (
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

func TestHistogramEmpty(t *testing.T) {
	h := NewHistogram()
	if got := h.Summary(); got != (Latency{}) {
		t.Errorf("empty summary = %+v", got)
	}
	if h.Count() != 0 || h.Quantile(0.99) != 0 {
		t.Errorf("empty count %d p99 %v", h.Count(), h.Quantile(0.99))
	}
}

// TestHistogramMatchesSortedSample compares the histogram's percentiles to
// the exact ones of the same sample: HDR with 3 significant digits must be
// within 0.1% (plus one microsecond, the unit it records in).
func TestHistogramMatchesSortedSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := NewHistogram()
	sample := make([]time.Duration, 100_000)
	for i := range sample {
		// Log-normal-ish: mostly around a millisecond, with a long tail.
		d := time.Duration(float64(time.Millisecond) * rng.ExpFloat64() * rng.ExpFloat64())
		d = d.Truncate(time.Microsecond) + time.Microsecond
		sample[i] = d
		h.Record(d)
	}
	sort.Slice(sample, func(i, j int) bool { return sample[i] < sample[j] })
	exact := func(q float64) time.Duration {
		i := int(q*float64(len(sample))+0.5) - 1
		return sample[max(0, min(i, len(sample)-1))]
	}
	s := h.Summary()
	for _, tc := range []struct {
		q   float64
		got time.Duration
	}{{0.5, s.P50}, {0.9, s.P90}, {0.99, s.P99}, {0.999, s.P999}, {1, s.Max}} {
		want := exact(tc.q)
		tol := want/1000 + time.Microsecond
		if diff := tc.got - want; diff < -tol || diff > tol {
			t.Errorf("q%v = %v, exact %v (tolerance %v)", tc.q, tc.got, want, tol)
		}
		if q := h.Quantile(tc.q); q != tc.got {
			t.Errorf("Quantile(%v) = %v, summary says %v", tc.q, q, tc.got)
		}
	}
	if s.Count != int64(len(sample)) || s.Min != sample[0] {
		t.Errorf("count %d min %v, want %d %v", s.Count, s.Min, len(sample), sample[0])
	}
	if s.P50Ms != float64(s.P50)/1e6 || s.P999Ms != float64(s.P999)/1e6 {
		t.Errorf("ms fields %v %v disagree with %v %v", s.P50Ms, s.P999Ms, s.P50, s.P999)
	}
}

func TestHistogramClamps(t *testing.T) {
	tests := []struct {
		name string
		in   time.Duration
		want time.Duration
	}{
		{"zero", 0, time.Microsecond},
		{"negative", -time.Second, time.Microsecond},
		{"sub-microsecond", 300 * time.Nanosecond, time.Microsecond},
		{"exact", 1234 * time.Microsecond, 1234 * time.Microsecond},
		{"huge", time.Hour, time.Duration(histMax) * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram()
			h.Record(tt.in)
			// One value: every percentile is that value, within HDR precision.
			got := h.Summary().Max
			if tol := tt.want / 1000; got < tt.want-tol || got > tt.want+tol {
				t.Errorf("Record(%v) reads back %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestHistogramMerge(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	for i := 1; i <= 100; i++ {
		a.Record(time.Duration(i) * time.Millisecond)
		b.Record(time.Duration(i) * time.Second / 10)
	}
	a.Merge(b)
	a.Merge(a) // no-op, must not deadlock
	s := a.Summary()
	if s.Count != 200 || b.Count() != 100 {
		t.Fatalf("counts after merge: %d, %d", s.Count, b.Count())
	}
	if s.Min != time.Millisecond || s.Max < 9990*time.Millisecond {
		t.Errorf("merged min %v max %v", s.Min, s.Max)
	}
	// Half the values are <= 100ms, so p50 sits at the top of a's range.
	if s.P50 < 99*time.Millisecond || s.P50 > 101*time.Millisecond {
		t.Errorf("merged p50 %v, want ~100ms", s.P50)
	}
}

func TestHistogramConcurrentRecord(t *testing.T) {
	h := NewHistogram()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.Record(time.Duration(g*1000+i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if h.Count() != 8000 {
		t.Errorf("count %d, want 8000", h.Count())
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	b.ReportAllocs()
	h := NewHistogram()
	for i := range b.N {
		h.Record(time.Duration(i%100_000) * time.Microsecond)
	}
}
