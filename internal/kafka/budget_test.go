package kafka

import (
	"testing"
	"time"
)

func testBudget(limit int64) *requestBudget {
	_, b := newLimitMetrics()
	b.limit = limit
	return b
}

// granted reports whether ch closes within a generous bound.
func granted(ch <-chan bool) bool {
	select {
	case ok := <-ch:
		return ok
	case <-time.After(10 * time.Second):
		return false
	}
}

func acquireAsync(b *requestBudget, n int64, done <-chan struct{}) <-chan bool {
	ch := make(chan bool, 1)
	go func() { ch <- b.acquire(n, done) }()
	return ch
}

// waitWaiters waits until n readers wait on b.
func waitWaiters(t *testing.T, b *requestBudget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.waiters)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBudgetWaitsAtLimit: below the limit a request is admitted at once,
// even one that takes the total past it (Kafka's non-strict pool, so a
// frame larger than the rest never starves); at the limit readers wait, and
// are admitted in order as bytes are released.
func TestBudgetWaitsAtLimit(t *testing.T) {
	b := testBudget(100)
	never := make(chan struct{})
	if !b.acquire(60, never) || !b.acquire(60, never) { // 0 -> 60 -> 120
		t.Fatal("admission below the limit waited")
	}
	first := acquireAsync(b, 10, never)
	waitWaiters(t, b, 1)
	second := acquireAsync(b, 500, never)
	waitWaiters(t, b, 2)
	b.release(60) // 60: room again, both admitted in order
	if !granted(first) || !granted(second) {
		t.Fatal("waiters not admitted after release")
	}
	if got := b.inUse(); got != 60+10+500 {
		t.Fatalf("in use %d, want 570", got)
	}
	b.release(60)
	b.release(10)
	b.release(500)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d after all released", got)
	}
}

// TestBudgetCancel: a reader whose connection closes while waiting holds
// nothing afterwards.
func TestBudgetCancel(t *testing.T) {
	b := testBudget(10)
	never := make(chan struct{})
	b.acquire(10, never)
	done := make(chan struct{})
	ch := acquireAsync(b, 5, done)
	waitWaiters(t, b, 1)
	close(done)
	if ok := <-ch; ok {
		t.Fatal("cancelled acquire reported success")
	}
	waitWaiters(t, b, 0)
	b.release(10)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d, want 0", got)
	}
}

// TestBudgetUnbounded: a limit <= 0 never waits but still counts.
func TestBudgetUnbounded(t *testing.T) {
	b := testBudget(-1)
	for range 10 {
		if !b.acquire(1<<30, nil) {
			t.Fatal("unbounded budget refused")
		}
	}
	if got := b.inUse(); got != 10<<30 {
		t.Fatalf("in use %d", got)
	}
}
