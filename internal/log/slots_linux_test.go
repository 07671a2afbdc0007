package log

import (
	"fmt"
	"runtime"
	"testing"
)

// TestKeyMapOffHeap: a clean round's key map of 64 MiB is not on the Go
// heap (HeapInuse does not grow by it), holds and finds its keys like a
// heap one, and release gives it back (a second round maps anew).
func TestKeyMapOffHeap(t *testing.T) {
	var before, after runtime.MemStats
	for round := range 2 {
		runtime.GC()
		runtime.ReadMemStats(&before)
		var m keyMap
		m.reset(64<<20, 4<<20)
		if m.free == nil || m.bytes() < 48<<20 {
			t.Fatalf("round %d: a %d-byte map on the heap (free set: %v)", round, m.bytes(), m.free != nil)
		}
		runtime.ReadMemStats(&after)
		if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
			t.Fatalf("round %d: the heap grew by %d bytes with the map", round, grew)
		}
		const n = 200_000
		for i := range n {
			m.put(fmt.Appendf(nil, "key-%d", i%(n/2)), int64(i))
		}
		if m.len() != n/2 {
			t.Fatalf("round %d: %d keys, want %d", round, m.len(), n/2)
		}
		for i := range n / 2 {
			if off, ok := m.get(fmt.Appendf(nil, "key-%d", i)); !ok || off != int64(i+n/2) {
				t.Fatalf("round %d: key-%d at %d (%v), want %d", round, i, off, ok, i+n/2)
			}
		}
		if _, ok := m.get([]byte("absent")); ok {
			t.Fatalf("round %d: an absent key found", round)
		}
		m.release()
		if m.slots != nil || m.free != nil {
			t.Fatal("release left slots")
		}
	}
	// A small map stays on the heap.
	var m keyMap
	m.reset(32<<20, 100)
	if m.free != nil {
		t.Fatalf("a %d-byte map outside the heap", m.bytes())
	}
}
