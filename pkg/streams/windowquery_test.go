package streams

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

func windowsOf(t *testing.T, d *TestDriver, store, k string, from, to int64) []string {
	t.Helper()
	ws, err := FetchWindows(d, store, String(), Int64(), k, time.UnixMilli(from), time.UnixMilli(to))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s@%d-%d=%d", w.Window.Key, w.Window.Start.UnixMilli(), w.Window.End.UnixMilli(), w.Value))
	}
	return out
}

// Window queries read a key's open windows of a time range, from each kind
// of window store.
func TestWindowQueries(t *testing.T) {
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	WindowedCount(WindowedBy(g, HoppingWindows(10*time.Millisecond, 5*time.Millisecond, 100*time.Millisecond)), "hop")
	SlidingCount(SlidingWindowedBy(g, SlidingWindows{TimeDifference: 10 * time.Millisecond, Grace: 100 * time.Millisecond}), "slide")
	SessionCount(SessionWindowedBy(g, SessionWindows{Gap: 5 * time.Millisecond, Grace: 100 * time.Millisecond}), "sess")
	d := newDriver(t, b)
	for _, r := range []struct {
		k  string
		ts int64
	}{{"a", 12}, {"b", 13}, {"a", 17}, {"a", 40}} {
		pipe(t, d, "in", r.k, "", r.ts)
	}
	all := int64(1) << 40
	for _, c := range []struct {
		store    string
		from, to int64
		want     []string
	}{
		{"hop", 0, all, []string{"a@5-15=1", "a@10-20=2", "a@15-25=1", "a@35-45=1", "a@40-50=1"}},
		{"hop", 10, 15, []string{"a@10-20=2", "a@15-25=1"}},
		{"slide", 0, all, []string{"a@2-12=1", "a@7-17=2", "a@13-23=1", "a@30-40=1"}},
		{"slide", 3, 13, []string{"a@7-17=2", "a@13-23=1"}},
		{"sess", 0, all, []string{"a@12-17=2", "a@40-40=1"}},
		{"sess", 13, all, []string{"a@40-40=1"}},
	} {
		if got := windowsOf(t, d, c.store, "a", c.from, c.to); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s [%d,%d]: %q, want %q", c.store, c.from, c.to, got, c.want)
		}
	}
	if got := windowsOf(t, d, "hop", "b", 0, all); !reflect.DeepEqual(got, []string{"b@5-15=1", "b@10-20=1"}) {
		t.Errorf("b: %q", got)
	}
	if _, err := FetchWindows(d, "nope", String(), Int64(), "a", time.UnixMilli(0), time.UnixMilli(1)); err == nil {
		t.Error("a query of a missing store succeeded")
	}
}

// Retained windows stay queryable after they close, take no more records,
// and are emitted once (EmitFinal); they go when stream time reaches their
// end plus the retention.
func TestWindowRetention(t *testing.T) {
	b := NewBuilder()
	g := GroupByKey(Stream(b, "in", String(), String()), String(), String())
	tbl := WindowedCount(WindowedBy(g, TumblingWindows(10*time.Millisecond, 0)).Emit(EmitFinal).Retain(50*time.Millisecond), "w")
	Map(tbl.ToStream(), func(w Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", w.Key, w.Start.UnixMilli()), n
	}).To("out", String(), Int64())
	d := newDriver(t, b)
	all := int64(1) << 40
	pipe(t, d, "in", "a", "", 1)
	pipe(t, d, "in", "a", "", 2)
	pipe(t, d, "in", "a", "", 25) // closes [0,10)
	if got, want := output(t, d, "out", Int64()), []string{"a@0=2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	pipe(t, d, "in", "a", "", 3) // late: [0,10) is closed
	if got, want := windowsOf(t, d, "w", "a", 0, all), []string{"a@0-10=2", "a@20-30=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("windows %q, want %q", got, want)
	}
	pipe(t, d, "in", "a", "", 59) // [0,10) kept until 10+50 = 60
	if got, want := windowsOf(t, d, "w", "a", 0, all), []string{"a@0-10=2", "a@20-30=1", "a@50-60=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("windows %q, want %q", got, want)
	}
	pipe(t, d, "in", "a", "", 60)
	if got, want := windowsOf(t, d, "w", "a", 0, all), []string{"a@20-30=1", "a@50-60=1", "a@60-70=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("windows %q, want %q", got, want)
	}
	if got, want := output(t, d, "out", Int64()), []string{"a@20=1", "a@50=1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("emitted %q, want %q (each window once)", got, want)
	}
	if n := d.DroppedLate("w"); n != 1 {
		t.Errorf("dropped %d, want 1", n)
	}
}
