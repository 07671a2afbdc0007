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
