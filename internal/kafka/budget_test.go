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
	b := testBudget(1000) // frames up to 250 bytes draw on it
	never := make(chan struct{})
	for range 3 { // 0 -> 240 -> 480 -> 720 -> 960 -> 1200
		if !b.acquire(240, never) {
			t.Fatal("admission below the limit waited")
		}
	}
	if !b.acquire(240, never) || !b.acquire(240, never) {
		t.Fatal("admission below the limit waited")
	}
	first := acquireAsync(b, 10, never)
	waitWaiters(t, b, 1)
	second := acquireAsync(b, 250, never)
	waitWaiters(t, b, 2)
	b.release(240) // 960: room again, both admitted in order
	b.release(240) // 720
	if !granted(first) || !granted(second) {
		t.Fatal("waiters not admitted after release")
	}
	if got := b.inUse(); got != 720+10+250 {
		t.Fatalf("in use %d, want 980", got)
	}
	for range 3 {
		b.release(240)
	}
	b.release(10)
	b.release(250)
	if got := b.inUse(); got != 0 {
		t.Fatalf("in use %d after all released", got)
	}
}

// TestBudgetCancel: a reader whose connection closes while waiting holds
// nothing afterwards.
func TestBudgetCancel(t *testing.T) {
	b := testBudget(40)
	never := make(chan struct{})
	for range 4 {
		b.acquire(10, never)
	}
	done := make(chan struct{})
	ch := acquireAsync(b, 5, done)
	waitWaiters(t, b, 1)
	close(done)
	if ok := <-ch; ok {
		t.Fatal("cancelled acquire reported success")
	}
	waitWaiters(t, b, 0)
	for range 4 {
		b.release(10)
	}
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

// TestBudgetLargeFramesTakeTheirOwnLane: a frame announcing more than a
// quarter of the limit (a client sending it slowly, or never) does not hold
// the budget other connections need: small requests go on, and only a
// second large frame waits for the first.
func TestBudgetLargeFramesTakeTheirOwnLane(t *testing.T) {
	b := testBudget(32 << 20)
	never := make(chan struct{})
	if !b.acquire(90<<20, never) {
		t.Fatal("first large frame refused")
	}
	small := make(chan bool, 1)
	go func() { small <- b.acquire(1<<10, never) }()
	if !granted(small) {
		t.Fatal("a small request waited behind a large frame being read")
	}
	second := make(chan bool, 1)
	go func() { second <- b.acquire(60<<20, never) }()
	select {
	case <-second:
		t.Fatal("two large frames in flight at once")
	case <-time.After(100 * time.Millisecond):
	}
	b.release(90 << 20)
	if !granted(second) {
		t.Fatal("the second large frame never got the lane")
	}
	b.release(60 << 20)
	b.release(1 << 10)
	if b.inUse() != 0 {
		t.Fatalf("%d bytes still reserved", b.inUse())
	}
}
