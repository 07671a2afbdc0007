package consumer

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLaneCache checks that lanes.lane returns one lane per key whatever
// the cache holds: keys that share a cache slot, keys shorter and longer
// than eight bytes, and keys whose lanes the sweep forgot.
func TestLaneCache(t *testing.T) {
	c, err := newForBench(func(context.Context, *kgo.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ls := c.lanesLocked("bench", 0)
	seen := map[string]*keyState{}
	var keys [][]byte
	for i := 0; i < 2000; i++ {
		keys = append(keys, []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("a-much-longer-key-%08d", i)))
	}
	for round := 0; round < 3; round++ {
		for _, k := range keys {
			ks := ls.lane("bench", 0, k)
			if ks.id.key != string(k) {
				t.Fatalf("key %q: lane of %q", k, ks.id.key)
			}
			if prev := seen[string(k)]; prev != nil && prev != ks {
				t.Fatalf("key %q: two lanes", k)
			}
			seen[string(k)] = ks
		}
	}
	// Two sweeps forget idle lanes; the cache must not hand them out.
	c.sweepLocked()
	c.sweepLocked()
	if len(ls.byKey) != 0 {
		t.Fatalf("%d lanes left after two sweeps", len(ls.byKey))
	}
	for _, k := range keys {
		if ks := ls.lane("bench", 0, k); ks == seen[string(k)] {
			t.Fatalf("key %q: a swept lane from the cache", k)
		}
	}
	if len(ls.byKey) != len(keys) {
		t.Fatalf("%d lanes, want %d", len(ls.byKey), len(keys))
	}
}
