package streams

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func sessionDriver(t *testing.T, w SessionWindows, e Emit) *TestDriver {
	t.Helper()
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	tbl := SessionCount(SessionWindowedBy(g, w).Emit(e), "sessions")
	Map(tbl.ToStream(), func(w Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d-%d", w.Key, w.Start.UnixMilli(), w.End.UnixMilli()), n
	}).To("out", String(), Int64())
	return newDriver(t, b)
}

// Hand-computed, gap 10ms, grace 0: a session closes once stream time
// passes its end + 10.
func TestSessionWindowsEmitFinal(t *testing.T) {
	d := sessionDriver(t, SessionWindows{Gap: 10 * time.Millisecond}, EmitFinal)
	steps := []struct {
		key  string
		ts   int64
		emit []string
	}{
		{"a", 0, nil},                     // a [0,0]
		{"a", 5, nil},                     // a [0,5] = 2
		{"a", 30, []string{"a@0-5=2"}},    // a [30,30]; stream time 30 closes ends < 20
		{"a", 22, nil},                    // joins [30,30]: a [22,30] = 2
		{"b", 3, nil},                     // b [3,3] ends before stream time 30: late
		{"a", 45, []string{"a@22-30=2"}},  // a [45,45]; closes ends < 35
		{"a", 40, nil},                    // joins [45,45]: a [40,45] = 2
		{"c", 100, []string{"a@40-45=2"}}, // closes ends < 90
	}
	for i, s := range steps {
		pipe(t, d, "in", s.key, "", s.ts)
		want := s.emit
		if want == nil {
			want = []string{}
		}
		if got := output(t, d, "out", Int64()); !reflect.DeepEqual(got, want) {
			t.Fatalf("after step %d (%s@%d): emitted %q, want %q", i, s.key, s.ts, got, want)
		}
	}
	if n := d.DroppedLate("sessions"); n != 1 {
		t.Errorf("dropped %d, want 1", n)
	}
}

// A record between two sessions of its key merges them into one.
func TestSessionWindowsMergeOnUpdate(t *testing.T) {
	d := sessionDriver(t, SessionWindows{Gap: 10 * time.Millisecond, Grace: 100 * time.Millisecond}, EmitOnUpdate)
	pipe(t, d, "in", "x", "", 0)
	pipe(t, d, "in", "x", "", 18) // 18 > 0+10: a second session
	pipe(t, d, "in", "y", "", 9)  // another key: its own session
	pipe(t, d, "in", "x", "", 9)  // within 10 of both: one session [0,18] of 3
	pipe(t, d, "in", "x", "", 29) // 29-18 = 11 > 10: a new session
	pipe(t, d, "in", "x", "", 28) // within 10 of both [0,18] and [29,29]
	want := []string{"x@0-0=1", "x@18-18=1", "y@9-9=1", "x@0-18=3", "x@29-29=1", "x@0-29=5"}
	if got := output(t, d, "out", Int64()); !reflect.DeepEqual(got, want) {
		t.Errorf("emitted %q, want %q", got, want)
	}
	if n := d.DroppedLate("sessions"); n != 0 {
		t.Errorf("dropped %d, want 0", n)
	}
}
