package lag

import (
	"context"
	"time"
)

// Point is one sample of a group's lag.
type Point struct {
	At         int64   `json:"at_ms"`
	Lag        int64   `json:"lag"`
	LagSeconds float64 `json:"lag_seconds"`
}

// History sizes: a sample every HistoryInterval, HistoryPoints kept per
// group (an hour), for at most HistoryGroups groups.
const (
	HistoryInterval = 10 * time.Second
	HistoryPoints   = 360
	HistoryGroups   = 10_000
)

// RunHistory samples every group's lag every HistoryInterval until ctx
// ends, for the console's charts (GET /v1/lag/{group} answers "history").
func (t *Tracker) RunHistory(ctx context.Context) {
	tick := time.NewTicker(HistoryInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.sample()
		}
	}
}

// sample records one point per group this broker coordinates.
func (t *Tracker) sample() {
	groups, err := t.Report("", false)
	if err != nil {
		return
	}
	now := t.now().UnixMilli()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.history == nil {
		t.history = map[string][]Point{}
	}
	live := make(map[string]bool, len(groups))
	for _, g := range groups {
		live[g.Group] = true
		h, ok := t.history[g.Group]
		if !ok && len(t.history) >= HistoryGroups {
			continue
		}
		if len(h) == HistoryPoints {
			copy(h, h[1:])
			h = h[:len(h)-1]
		}
		t.history[g.Group] = append(h, Point{At: now, Lag: g.TotalLag, LagSeconds: g.MaxLagSeconds})
	}
	for g := range t.history {
		if !live[g] {
			delete(t.history, g)
		}
	}
}

// History returns a copy of group's samples, oldest first.
func (t *Tracker) History(group string) []Point {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Point(nil), t.history[group]...)
}
