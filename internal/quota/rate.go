package quota

import (
	"sync"
	"time"
)

// Kafka's defaults: quota.window.num samples of quota.window.size.seconds.
const (
	samples  = 11
	sampleMs = 1000
)

// rate measures bytes per second over the last samples windows, as Kafka's
// Rate metric does: a young rate counts as if samples-1 windows had
// passed, so a client's first burst is not measured over a few
// milliseconds.
type rate struct {
	mu    sync.Mutex
	start [samples]int64 // window start, unix ms; 0: unused
	sum   [samples]float64
	cur   int
	last  int64
}

// recordAndThrottle adds v at now and returns the delay that brings the
// measured rate back to bound (Kafka's (rate - bound) / bound * window),
// at most the full measurement window.
func (r *rate) recordAndThrottle(now time.Time, v, bound float64) time.Duration {
	ms := now.UnixMilli()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = ms
	if ms-r.start[r.cur] >= sampleMs {
		r.cur = (r.cur + 1) % samples
		r.start[r.cur], r.sum[r.cur] = ms, 0
	}
	r.sum[r.cur] += v
	var total float64
	oldest := ms
	for i := range samples {
		if r.start[i] == 0 || ms-r.start[i] >= samples*sampleMs {
			continue
		}
		total += r.sum[i]
		oldest = min(oldest, r.start[i])
	}
	elapsed := ms - oldest
	if full := elapsed / sampleMs; full < samples-1 {
		elapsed += (samples - 1 - full) * sampleMs
	}
	observed := total / (float64(elapsed) / 1000)
	if observed <= bound {
		return 0
	}
	d := time.Duration((observed - bound) / bound * float64(elapsed) * float64(time.Millisecond))
	return min(d, samples*sampleMs*time.Millisecond)
}

func (r *rate) idleSince(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(time.UnixMilli(r.last))
}
