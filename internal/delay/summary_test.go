package delay

import (
	"fmt"
	"testing"
)

func TestSummary(t *testing.T) {
	const now = int64(1_767_225_600_000) // a minute boundary
	var s summary
	for _, d := range []int64{-90_000, 30_000, 5 * 60_000, 5*60_000 + 1, 2 * 86_400_000} {
		s.add("a", now+d)
	}
	s.add("b", now+40*86_400_000)
	s.remove("a", now+5*60_000+1)
	s.remove("a", now+99*86_400_000) // not held: nothing changes
	s.remove("c", now)
	if s.total != 5 {
		t.Fatalf("total %d, want 5", s.total)
	}
	by := map[string]*TopicStats{}
	s.merge(by, "", now)
	a, b := by["a"], by["b"]
	if a == nil || b == nil || len(by) != 2 {
		t.Fatalf("topics %v", by)
	}
	// overdue, 1m, 10m, 1h, 1d, 7d, 30d, later
	if got := fmt.Sprint(a.Pending, a.DueIn); got != "4 [1 1 1 0 0 1 0 0]" {
		t.Errorf("a: %s", got)
	}
	if got := fmt.Sprint(b.Pending, b.DueIn); got != "1 [0 0 0 0 0 0 0 1]" {
		t.Errorf("b: %s", got)
	}
	if a.FirstDue != now-120_000 || a.LastDue != now+2*86_400_000+59_999 {
		t.Errorf("a: first %d last %d", a.FirstDue-now, a.LastDue-now)
	}
	only := map[string]*TopicStats{}
	s.merge(only, "b", now)
	if len(only) != 1 || only["b"] == nil {
		t.Errorf("merge of b alone: %v", only)
	}
	for range 4 {
		s.remove("a", now-90_000)
	}
	if _, ok := s.topics["a"]; !ok || s.topics["a"].n != 3 {
		t.Errorf("removing more than held: %+v", s.topics["a"])
	}
}
