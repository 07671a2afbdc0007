package delay

import (
	"math/rand/v2"
	"testing"
)

// TestWheelNeverEarlyNeverLost adds entries at random times, advances the
// clock in random steps and checks that each comes out once, at or after
// its due time, and within a tick of the step that passed it.
func TestWheelNeverEarlyNeverLost(t *testing.T) {
	for _, span := range []int64{5_000, 3_600_000, 100 * 86_400_000} {
		rng := rand.New(rand.NewPCG(1, uint64(span)))
		start := int64(1_700_000_000_123)
		w := newWheel(10, 64, start, span)
		const n = 20000
		es := make([]*entry, n)
		for i := range es {
			es[i] = &entry{due: start + rng.Int64N(span), res: int64(i)}
			w.put(es[i])
		}
		seen := make([]bool, n)
		now := start
		var out []*entry
		for got := 0; got < n; {
			prev := now
			now += 1 + rng.Int64N(span/50+1)
			out = w.expire(now, out[:0])
			for _, e := range out {
				if seen[e.res] {
					t.Fatalf("span %d: entry %d twice", span, e.res)
				}
				seen[e.res] = true
				if e.due > now {
					t.Fatalf("span %d: entry due %d out at %d", span, e.due, now)
				}
				if e.due <= prev-10 && e.due > start {
					t.Fatalf("span %d: entry due %d came out late at %d (previous step %d)", span, e.due, now, prev)
				}
				got++
			}
			if now > start+2*span {
				t.Fatalf("span %d: %d of %d entries never came out", span, n-got, n)
			}
		}
		if w.n != 0 {
			t.Errorf("span %d: wheel still counts %d entries", span, w.n)
		}
	}
}

func TestWheelGoneAndNext(t *testing.T) {
	w := newWheel(10, 8, 0, 100_000)
	a := &entry{due: 50}
	b := &entry{due: 5000}
	w.put(a)
	w.put(b)
	if nx := w.next(); nx > 50 {
		t.Fatalf("next %d, want <= 50", nx)
	}
	a.gone = true
	if out := w.expire(100, nil); len(out) != 0 {
		t.Fatalf("gone entry came out: %v", out)
	}
	if out := w.expire(4999, nil); len(out) != 0 {
		t.Fatalf("early: %v", out)
	}
	if out := w.expire(5000, nil); len(out) != 1 || out[0] != b {
		t.Fatalf("want b at 5000, got %v", out)
	}
}
