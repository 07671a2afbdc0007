package streams

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func slidingDriver(t *testing.T, w SlidingWindows, emit Emit) *TestDriver {
	t.Helper()
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	tbl := SlidingCount(SlidingWindowedBy(g, w).Emit(emit), "slide")
	Map(tbl.ToStream(), func(w Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d-%d", w.Key, w.Start.UnixMilli(), w.End.UnixMilli()), n
	}).To("out", String(), Int64())
	return newDriver(t, b)
}

// Hand-computed with Kafka Streams' sliding window rules (difference 10ms,
// grace 5ms, emit on update): every record updates the windows it falls
// in, creates its left window [t-10, t] and, when a later record is within
// reach, its right window [t+1, t+11]; the previous record's right window
// is created when this record falls in it.
func TestSlidingWindowsEmitOnUpdate(t *testing.T) {
	d := slidingDriver(t, SlidingWindows{TimeDifference: 10 * time.Millisecond, Grace: 5 * time.Millisecond}, EmitOnUpdate)
	steps := []struct {
		key  string
		ts   int64
		emit []string
	}{
		{"a", 20, []string{"a@10-20=1"}},
		// 20's right window gets 25; 25's left window holds 20 and 25.
		{"a", 25, []string{"a@21-31=1", "a@15-25=2"}},
		// Out of order, within grace: the windows holding 22 grow (newest
		// first); 22's left window {20,22}; its right window {25}.
		{"a", 22, []string{"a@21-31=2", "a@15-25=3", "a@12-22=2", "a@23-33=1"}},
		// Stream time 25, close time 20: 9+1+10 <= 20, every window of 9
		// is closed: dropped and counted.
		{"a", 9, []string{}},
		{"b", 40, []string{"b@30-40=1"}},
		// Close time 35: [23,33] and [21,31] are closed (two drops), 30's
		// left window [20,30] too (one more); 25's right window [26,36]
		// is open and created.
		{"a", 30, []string{"a@26-36=1"}},
	}
	for i, s := range steps {
		pipe(t, d, "in", s.key, "", s.ts)
		if got := output(t, d, "out", Int64()); !reflect.DeepEqual(got, s.emit) {
			t.Fatalf("step %d (%s@%d): emitted %q, want %q", i, s.key, s.ts, got, s.emit)
		}
	}
	if got := d.DroppedLate("slide"); got != 4 {
		t.Errorf("dropped %d, want 4 (one record, three closed windows)", got)
	}
}

// Early records (before the time difference) share [0, 10]; emit final
// writes each window once, when stream time passes its end (grace 0).
func TestSlidingWindowsEarlyRecordsEmitFinal(t *testing.T) {
	d := slidingDriver(t, SlidingWindows{TimeDifference: 10 * time.Millisecond}, EmitFinal)
	pipe(t, d, "in", "a", "", 3) // [0,10]={3}
	pipe(t, d, "in", "a", "", 5) // [0,10]={3,5}, 3's right window [4,14]={5}
	if got := output(t, d, "out", Int64()); len(got) != 0 {
		t.Fatalf("emitted %q before any window closed", got)
	}
	// [4,14]={5,12}, 5's right window [6,16]={12}, 12's left window
	// [2,12]={3,5,12}; stream time 12 closes [0,10].
	pipe(t, d, "in", "a", "", 12)
	if got, want := output(t, d, "out", Int64()), []string{"a@0-10=2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	// Stream time 30 closes every window starting before 20.
	pipe(t, d, "in", "a", "", 30)
	if got, want := output(t, d, "out", Int64()), []string{"a@2-12=3", "a@4-14=2", "a@6-16=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	pipe(t, d, "in", "b", "", 100)
	if got, want := output(t, d, "out", Int64()), []string{"a@20-30=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	if got := d.DroppedLate("slide"); got != 0 {
		t.Errorf("dropped %d, want 0", got)
	}
}

// Out-of-order records within grace give exactly the windows of the
// definition: [t-d, t] for every record (or [0, d] before d), and
// [t+1, t+1+d] for every record with a later one within d+1, each with the
// count of the records it holds.
func TestSlidingWindowsMatchDefinition(t *testing.T) {
	const diff = 50
	d := slidingDriver(t, SlidingWindows{TimeDifference: diff * time.Millisecond, Grace: time.Hour}, EmitFinal)
	var ts []int64
	seed := uint64(7)
	for i := 0; i < 300; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		t0 := int64(i*7) + int64(seed>>33)%120 - 60 // out of order by up to 120ms
		if t0 < 0 {
			t0 = -t0
		}
		ts = append(ts, t0)
		pipe(t, d, "in", "a", "", t0)
	}
	pipe(t, d, "in", "z", "", int64(time.Hour/time.Millisecond)*3)
	got := map[string]bool{}
	for _, s := range output(t, d, "out", Int64()) {
		got[s] = true
	}
	count := func(lo, hi int64) (n int) {
		for _, x := range ts {
			if x >= lo && x <= hi {
				n++
			}
		}
		return n
	}
	want := map[string]bool{}
	for _, x := range ts {
		lo := max(0, x-diff)
		want[fmt.Sprintf("a@%d-%d=%d", lo, lo+diff, count(lo, lo+diff))] = true
		if n := count(x+1, x+1+diff); n > 0 {
			want[fmt.Sprintf("a@%d-%d=%d", x+1, x+1+diff, n)] = true
		}
	}
	for w := range want {
		if !got[w] {
			t.Errorf("missing window %s", w)
		}
	}
	for w := range got {
		if !want[w] {
			t.Errorf("unexpected window %s", w)
		}
	}
}
