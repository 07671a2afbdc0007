package log

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// heldPuts holds its next `hold` PUTs until the gate opens or the PUT is
// cancelled, and records every PUT's key.
type heldPuts struct {
	objstore.Storage
	gate      chan struct{}
	held      chan string // each held PUT's key
	cancelled atomic.Int32

	mu   sync.Mutex
	hold int
	puts []string
}

func newHeldPuts(st objstore.Storage, hold int) *heldPuts {
	return &heldPuts{Storage: st, hold: hold, gate: make(chan struct{}), held: make(chan string, 16)}
}

func (s *heldPuts) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.mu.Lock()
	s.puts = append(s.puts, key)
	block := s.hold > 0
	if block {
		s.hold--
	}
	s.mu.Unlock()
	if block {
		s.held <- key
		select {
		case <-s.gate:
		case <-ctx.Done():
			s.cancelled.Add(1)
			return ctx.Err()
		}
	}
	return s.Storage.Put(ctx, key, r, size)
}

func (s *heldPuts) putKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.puts...)
}

// TestSharedPutHedged: a flush PUT that hangs is raced by a second PUT of
// the same object after the hedge delay; the append is acknowledged
// through the second, the first is cancelled, and the object is stored.
func TestSharedPutHedged(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	var gs *heldPuts
	a := openSharedStore(t, dir, md, la, func(st objstore.Storage) objstore.Storage {
		gs = newHeldPuts(st, 1)
		return gs
	}, func(c *Config) { c.Shared.PutHedge = 20 * time.Millisecond })
	ps := ledTopic(t, a, la, 1)
	mustAppend(t, ps[0], mkBatch(t, 0, 1000, 3, nil, "h"))
	if hw := ps[0].HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3", hw)
	}
	keys := gs.putKeys()
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("PUTs %v, want the same object twice", keys)
	}
	testEventually(t, func() bool { return gs.cancelled.Load() == 1 })
	if n := counterValue(a.m.sharedPutHedges); n != 1 {
		t.Errorf("hedges counted %v, want 1", n)
	}
	if _, err := gs.Size(context.Background(), keys[0]); err != nil {
		t.Errorf("hedged object: %v", err)
	}
}

// TestSharedPutOverlaps: while a group's PUTs hang, the writer builds the
// next group and stores it, but registers it only after the first: the
// high watermark moves past neither until the first group lands, then
// past both, in order.
func TestSharedPutOverlaps(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	var gs *heldPuts
	a := openSharedStore(t, dir, md, la, func(st objstore.Storage) objstore.Storage {
		gs = newHeldPuts(st, 2) // the first PUT and its hedge
		return gs
	}, func(c *Config) { c.Shared.PutHedge = 10 * time.Millisecond })
	t.Cleanup(func() {
		select {
		case <-gs.gate:
		default:
			close(gs.gate)
		}
	})
	ps := ledTopic(t, a, la, 1)
	ctx := context.Background()
	r1, err := ps[0].AppendAsync(ctx, mkBatch(t, 0, 1000, 2, nil, "one"))
	if err != nil {
		t.Fatal(err)
	}
	first := <-gs.held
	if k := <-gs.held; k != first {
		t.Fatalf("hedge PUT %s, want %s again", k, first)
	}
	r2, err := ps[0].AppendAsync(ctx, mkBatch(t, 0, 1000, 3, nil, "two"))
	if err != nil {
		t.Fatal(err)
	}
	testEventually(t, func() bool { return len(gs.putKeys()) >= 3 }) // the second group's PUT (and maybe its hedge), alongside
	time.Sleep(50 * time.Millisecond)                                // registration had its chance to misorder
	if hw := ps[0].HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d while the first group's PUT hangs, want 0", hw)
	}
	close(gs.gate)
	if err := ps[0].WaitDurable(ctx, r2, 4); err != nil {
		t.Fatal(err)
	}
	if err := ps[0].WaitDurable(ctx, r1, 1); err != nil {
		t.Fatal(err)
	}
	if hw := ps[0].HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d, want 5", hw)
	}
	if rs := readAll(t, ps[0], 1<<20); len(rs) != 5 {
		t.Fatalf("read %d records, want 5", len(rs))
	}
}

// TestPutTimesDelay: the adaptive delay is hedgeMax until enough PUTs were
// seen, then their 99th percentile, never below hedgeMin; a fixed delay is
// kept and a negative one turns hedging off.
func TestPutTimesDelay(t *testing.T) {
	pt := newPutTimes(0)
	if d, ok := pt.hedgeAfter(); !ok || d != hedgeMax {
		t.Fatalf("before any PUT: %v, %v; want %v", d, ok, hedgeMax)
	}
	for range hedgeWindow {
		pt.record(time.Millisecond)
	}
	if d, _ := pt.hedgeAfter(); d != hedgeMin {
		t.Fatalf("PUTs of 1 ms: delay %v, want the floor %v", d, hedgeMin)
	}
	// Slow PUTs: 5 in 256 at 400 ms put the 99th percentile there; 2 would not.
	for i := range hedgeWindow {
		d := 100 * time.Millisecond
		if i < 5 {
			d = 400 * time.Millisecond
		}
		pt.record(d)
	}
	if d, _ := pt.hedgeAfter(); d != 400*time.Millisecond {
		t.Fatalf("delay %v, want the 99th percentile 400ms", d)
	}
	if d, ok := newPutTimes(30 * time.Millisecond).hedgeAfter(); !ok || d != 30*time.Millisecond {
		t.Fatalf("fixed: %v, %v", d, ok)
	}
	if _, ok := newPutTimes(-1).hedgeAfter(); ok {
		t.Fatal("negative: hedging still on")
	}
}

// TestPutTimesBudget: hedges are limited to hedgeBurst in a row, then to
// hedgeBudget per PUT started, so a service slow for every PUT at once is
// not sent each of them twice.
func TestPutTimesBudget(t *testing.T) {
	pt := newPutTimes(0)
	spent := 0
	for pt.takeHedge() {
		spent++
	}
	if spent != int(hedgeBurst) {
		t.Fatalf("hedges in a row %d, want %v", spent, hedgeBurst)
	}
	const puts = 1000
	for range puts {
		pt.started()
		if pt.takeHedge() {
			spent++
		}
	}
	if want := int(hedgeBurst) + int(puts*hedgeBudget); spent < want-1 || spent > want {
		t.Fatalf("hedges over %d slow PUTs %d, want about %d", puts, spent, want)
	}
}

// TestSharedPutHedgeBudget: with the budget spent, a slow PUT is not raced
// (the skip is counted) and still completes the append.
func TestSharedPutHedgeBudget(t *testing.T) {
	dir, md, la, _ := newSharedEnv(t)
	var gs *heldPuts
	a := openSharedStore(t, dir, md, la, func(st objstore.Storage) objstore.Storage {
		gs = newHeldPuts(st, 1)
		return gs
	}, func(c *Config) { c.Shared.PutHedge = 5 * time.Millisecond })
	for a.putTimes.takeHedge() {
	}
	ps := ledTopic(t, a, la, 1)
	ctx := context.Background()
	r, err := ps[0].AppendAsync(ctx, mkBatch(t, 0, 1000, 2, nil, "b"))
	if err != nil {
		t.Fatal(err)
	}
	<-gs.held
	testEventually(t, func() bool { return counterValue(a.m.sharedPutHedgesSkipped) == 1 })
	if n := len(gs.putKeys()); n != 1 {
		t.Fatalf("%d PUTs with the budget spent, want 1", n)
	}
	close(gs.gate)
	if err := ps[0].WaitDurable(ctx, r, 1); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(a.m.sharedPutHedges); n != 0 {
		t.Errorf("hedges counted %v, want 0", n)
	}
}
