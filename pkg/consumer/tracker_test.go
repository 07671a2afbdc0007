package consumer

import "testing"

func TestTracker(t *testing.T) {
	tr := newTracker()
	if _, ok := tr.mark(); ok {
		t.Fatal("empty tracker has a mark")
	}
	for _, o := range []int64{10, 11, 12, 14, 15} {
		if !tr.add(o) {
			t.Fatalf("add %d refused", o)
		}
	}
	if tr.add(12) {
		t.Fatal("add of an old offset accepted")
	}
	steps := []struct {
		finish int64
		want   int64
	}{
		{11, 10}, {14, 10}, {10, 12}, {12, 15}, {15, 16}, {99, 16},
	}
	for _, s := range steps {
		tr.finish(s.finish)
		if m, _ := tr.mark(); m != s.want {
			t.Fatalf("after finishing %d: mark %d, want %d", s.finish, m, s.want)
		}
	}
	tr.committedAt(16)
	if _, moved := tr.mark(); moved {
		t.Fatal("mark moved after commit")
	}
	// Many offsets: compaction keeps the answer.
	for o := int64(16); o < 1000; o++ {
		tr.add(o)
	}
	for o := int64(999); o >= 17; o-- {
		tr.finish(o)
	}
	if m, _ := tr.mark(); m != 16 {
		t.Fatalf("mark %d, want 16", m)
	}
	tr.finish(16)
	if m, _ := tr.mark(); m != 1000 || tr.inFlight() != 0 {
		t.Fatalf("mark %d inFlight %d, want 1000 and 0", m, tr.inFlight())
	}
	// Sequence numbers survive compaction.
	first, seq := tr.addAll([]int64{999, 1000, 1001, 1002}, 1003)
	if first != 1 {
		t.Fatalf("addAll took from index %d, want 1", first)
	}
	tr.finishSeqs([]int64{seq + 1, seq + 2})
	if m, _ := tr.mark(); m != 1000 {
		t.Fatalf("mark %d, want 1000", m)
	}
	tr.finishSeqs([]int64{seq, seq - 1, seq + 99})
	if m, _ := tr.mark(); m != 1003 {
		t.Fatalf("mark %d, want 1003", m)
	}
}
