package lag

import (
	"testing"
	"time"
)

// fixedLog and fixedGroups are in-memory sources for the tracker.
type fixedLog struct{ end int64 }

func (l *fixedLog) Offsets(string, int32) (int64, int64, error) { return 0, l.end, nil }
func (l *fixedLog) Timestamp(string, int32, int64) (int64, bool, error) {
	return time.Now().Add(-time.Minute).UnixMilli(), true, nil
}

type fixedGroups struct{ gs []GroupOffsets }

func (g *fixedGroups) Groups() ([]GroupOffsets, error) { return g.gs, nil }

func TestHistory(t *testing.T) {
	l := &fixedLog{end: 10}
	g := &fixedGroups{gs: []GroupOffsets{{Group: "a", Offsets: []Committed{{Topic: "t", Offset: 4}}}}}
	tr := NewTracker(DefaultConfig(), l, g)
	for i := range HistoryPoints + 5 {
		l.end = int64(10 + i)
		tr.sample()
	}
	h := tr.History("a")
	if len(h) != HistoryPoints {
		t.Fatalf("%d points, want the last %d", len(h), HistoryPoints)
	}
	if h[0].Lag != 11 || h[len(h)-1].Lag != int64(10+HistoryPoints+4-4) {
		t.Fatalf("oldest lag %d, newest %d", h[0].Lag, h[len(h)-1].Lag)
	}
	if h[len(h)-1].LagSeconds < 59 {
		t.Fatalf("lag seconds %v", h[len(h)-1].LagSeconds)
	}
	g.gs = nil
	tr.sample()
	if len(tr.History("a")) != 0 {
		t.Fatal("a group that is gone keeps its history")
	}
}
