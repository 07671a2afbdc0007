package bench

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in microseconds with three
// significant digits (0.1% error) from 1µs to histMax; larger values are
// clamped to histMax so one stuck record cannot drop out of the tail.
const (
	histMin     = 1
	histMax     = int64(10 * time.Minute / time.Microsecond)
	histSigFigs = 3
)

// Histogram is a concurrency-safe latency histogram. kgo may run promises
// from more than one goroutine, so Record takes a lock; each producer owns
// its own Histogram and they are merged at the end, so the lock is not
// contended across producers.
type Histogram struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(histMin, histMax, histSigFigs)}
}

// Record adds one observation. Values below 1µs count as 1µs.
func (h *Histogram) Record(d time.Duration) {
	us := int64(d / time.Microsecond)
	if us < histMin {
		us = histMin
	}
	if us > histMax {
		us = histMax
	}
	h.mu.Lock()
	_ = h.h.RecordValue(us) // cannot fail: us is clamped to the trackable range
	h.mu.Unlock()
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if h == o {
		return
	}
	o.mu.Lock()
	oh := o.h.Clone() // copy first: holding both locks could deadlock two crossed merges
	o.mu.Unlock()
	h.mu.Lock()
	h.h.Merge(oh)
	h.mu.Unlock()
}

// Count is the number of observations.
func (h *Histogram) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.h.TotalCount()
}

// Quantile returns the value at quantile q in [0, 1].
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.h.ValueAtQuantile(q*100)) * time.Microsecond
}

// Latency summarises a Histogram. Durations marshal to JSON as nanoseconds;
// the *Ms fields are there for people reading the JSON.
type Latency struct {
	Count  int64         `json:"count"`
	Min    time.Duration `json:"min_ns"`
	Mean   time.Duration `json:"mean_ns"`
	P50    time.Duration `json:"p50_ns"`
	P90    time.Duration `json:"p90_ns"`
	P99    time.Duration `json:"p99_ns"`
	P999   time.Duration `json:"p999_ns"`
	Max    time.Duration `json:"max_ns"`
	P50Ms  float64       `json:"p50_ms"`
	P99Ms  float64       `json:"p99_ms"`
	P999Ms float64       `json:"p999_ms"`
}

// Summary returns the percentiles the report prints.
func (h *Histogram) Summary() Latency {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	qs := h.h.ValueAtPercentiles([]float64{50, 90, 99, 99.9})
	l := Latency{
		Count: h.h.TotalCount(),
		Min:   us(h.h.Min()),
		Mean:  time.Duration(h.h.Mean() * float64(time.Microsecond)),
		P50:   us(qs[50]),
		P90:   us(qs[90]),
		P99:   us(qs[99]),
		P999:  us(qs[99.9]),
		Max:   us(h.h.Max()),
	}
	l.P50Ms, l.P99Ms, l.P999Ms = ms(l.P50), ms(l.P99), ms(l.P999)
	return l
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
