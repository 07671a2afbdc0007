package log

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"
)

// Hedged PUTs. Object stores answer most PUTs quickly and a few very slowly
// (a stalled connection, a slow node behind the load balancer), and in
// cluster mode every acks=all produce waits for its flush's PUT. A PUT
// still running after the hedge delay is raced by a second, identical one;
// the first to succeed wins and the other is cancelled. Objects are written
// once under a fresh key, so two PUTs of the same bytes to the same key are
// harmless whichever lands last; one that lands after its object was
// deleted is an orphan, which the controller's GC removes.
//
// A hedge only helps when the slowness is the one request's. When the whole
// service is slow (busy, or stalled for a moment), every PUT in flight is
// late together and racing each one doubles the load at the worst time. So
// the delay is high (the recent 99th percentile, at least hedgeMin) and
// hedges are budgeted: at most hedgeBudget of PUTs on average, hedgeBurst
// in a row. Measured on a 3-broker cluster over versitygw (docs/
// benchmarks.md), hedging every PUT slower than the 90th percentile (at
// least 5 ms) gave a record p99 two to four times that with no hedging.

// Hedge delay bounds when it follows the recent PUT times, and the budget.
const (
	hedgeQuantile = 0.99
	hedgeMin      = 25 * time.Millisecond
	hedgeMax      = 10 * time.Second
	hedgeWindow   = 256  // PUT times remembered
	hedgeWarmup   = 32   // PUTs seen before the delay adapts (hedgeMax until then)
	hedgeBudget   = 0.05 // hedges earned per PUT started
	hedgeBurst    = 5.0  // most hedges that may be spent in a row
)

// putTimes remembers the last hedgeWindow PUT times and answers the hedge
// delay: fixed if configured, else their hedgeQuantile (within hedgeMin and
// hedgeMax). It also keeps the hedge budget, whatever the delay.
type putTimes struct {
	fixed time.Duration // > 0: always this; < 0: never hedge

	mu     sync.Mutex
	ring   [hedgeWindow]time.Duration
	n      int // PUTs recorded, total
	delay  time.Duration
	tokens float64 // hedges that may be sent now
}

func newPutTimes(fixed time.Duration) *putTimes {
	return &putTimes{fixed: fixed, delay: hedgeMax, tokens: hedgeBurst}
}

// started earns a PUT's share of the hedge budget.
func (t *putTimes) started() {
	t.mu.Lock()
	t.tokens = min(t.tokens+hedgeBudget, hedgeBurst)
	t.mu.Unlock()
}

// takeHedge spends one hedge from the budget; false when none is left.
func (t *putTimes) takeHedge() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}

func (t *putTimes) record(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring[t.n%hedgeWindow] = d
	t.n++
	// Recompute every 16 PUTs: cheap enough, and the delay moves slowly.
	if t.n >= hedgeWarmup && t.n%16 == 0 {
		s := slices.Clone(t.ring[:min(t.n, hedgeWindow)])
		slices.Sort(s)
		t.delay = min(max(s[int(float64(len(s)-1)*hedgeQuantile)], hedgeMin), hedgeMax)
	}
}

// hedgeAfter is how long a PUT may run before it is raced; ok is false when
// hedging is off.
func (t *putTimes) hedgeAfter() (time.Duration, bool) {
	switch {
	case t.fixed < 0:
		return 0, false
	case t.fixed > 0:
		return t.fixed, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.delay, true
}

// putHedged is one attempt at storing body under key: a PUT, raced by a
// second one if it is still running after the hedge delay and the budget
// allows. It returns nil
// as soon as either succeeds, and an error only when every PUT started has
// failed.
func (e *Engine) putHedged(ctx context.Context, key string, body []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the loser, if still running
	start := time.Now()
	e.putTimes.started()
	done := make(chan error, 2)
	put := func() { done <- e.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))) }
	go put()
	running := 1
	var hedge <-chan time.Time
	if d, ok := e.putTimes.hedgeAfter(); ok {
		t := time.NewTimer(d)
		defer t.Stop()
		hedge = t.C
	}
	var firstErr error
	for {
		select {
		case err := <-done:
			running--
			if err == nil {
				e.putTimes.record(time.Since(start))
				return nil
			}
			if firstErr == nil {
				firstErr = err
			}
			if running == 0 {
				return firstErr
			}
		case <-hedge:
			hedge = nil
			if !e.putTimes.takeHedge() {
				e.m.sharedPutHedgesSkipped.Inc()
				continue
			}
			e.m.sharedPutHedges.Inc()
			running++
			go put()
		}
	}
}
