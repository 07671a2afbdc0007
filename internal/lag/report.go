package lag

import (
	"cmp"
	"slices"
)

// PartitionLag is one partition of a group, judged.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed_offset"`
	// LogStart and End are the partition's log start offset and high
	// watermark now.
	LogStart int64 `json:"log_start_offset"`
	End      int64 `json:"end_offset"`
	// Lag is End minus Committed (records, markers included), never
	// negative.
	Lag int64 `json:"lag"`
	// LagSeconds is now minus the timestamp of the first record at or
	// after Committed; 0 when caught up.
	LagSeconds float64 `json:"lag_seconds"`
	CommitTime int64   `json:"commit_time_ms"`
	Status     Status  `json:"status"`
	// Complete is how full the window of commits is, 0 to 1.
	Complete float64 `json:"complete"`
	// Window is the commits the verdict was made from, oldest first
	// (only when asked for one group).
	Window []Entry `json:"window,omitempty"`
	// Error explains an ERROR status.
	Error string `json:"error,omitempty"`
}

// GroupLag is one group, judged: its status is its worst partition's.
type GroupLag struct {
	Group         string  `json:"group"`
	State         string  `json:"state"`
	Members       int     `json:"members"`
	Generation    int32   `json:"generation"`
	Status        Status  `json:"status"`
	TotalLag      int64   `json:"total_lag"`
	MaxLagSeconds float64 `json:"max_lag_seconds"`
	// Commits is the number of commits this broker has seen from the
	// group since it started (the commit rate is its derivative).
	Commits int64 `json:"commits"`
	// WindowSize is how many commits a full window holds.
	WindowSize int            `json:"window_size"`
	Partitions []PartitionLag `json:"partitions"`
	// Assignments lists the members and their partitions (only when asked
	// for one group).
	Assignments []Member `json:"assignments,omitempty"`
	// History is the group's total lag sampled every 10 s over the last
	// hour, oldest first (only when asked for one group).
	History []Point `json:"history,omitempty"`
}

// Report judges every group this broker coordinates, worst first; with
// only set, just that group (nil when it has no offsets here). withWindow
// adds each partition's window of commits.
func (t *Tracker) Report(only string, withWindow bool) ([]GroupLag, error) {
	gs, err := t.groupsS.Groups()
	if err != nil {
		return nil, err
	}
	if only == "" {
		live := make(map[string]map[tp]bool, len(gs))
		for _, g := range gs {
			parts := make(map[tp]bool, len(g.Offsets))
			for _, o := range g.Offsets {
				parts[tp{o.Topic, o.Partition}] = true
			}
			live[g.Group] = parts
		}
		t.retain(live)
	}
	now := t.now().UnixMilli()
	var out []GroupLag
	for _, g := range gs {
		if only != "" && g.Group != only {
			continue
		}
		gl := GroupLag{Group: g.Group, State: g.State, Members: len(g.Members), Generation: g.Generation,
			Commits: t.commitCount(g.Group), WindowSize: t.cfg.Window, Partitions: make([]PartitionLag, 0, len(g.Offsets))}
		if withWindow {
			gl.Assignments = g.Members
			gl.History = t.History(g.Group)
		}
		for _, o := range g.Offsets {
			pl := t.judge(g.Group, o, now, withWindow)
			gl.Status = max(gl.Status, pl.Status)
			gl.TotalLag += pl.Lag
			gl.MaxLagSeconds = max(gl.MaxLagSeconds, pl.LagSeconds)
			gl.Partitions = append(gl.Partitions, pl)
		}
		slices.SortFunc(gl.Partitions, func(a, b PartitionLag) int {
			return cmp.Or(cmp.Compare(b.Status, a.Status), cmp.Compare(b.LagSeconds, a.LagSeconds),
				cmp.Compare(b.Lag, a.Lag), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		out = append(out, gl)
	}
	sortGroups(out)
	return out, nil
}

// sortGroups sorts worst first.
func sortGroups(out []GroupLag) {
	slices.SortFunc(out, func(a, b GroupLag) int {
		return cmp.Or(cmp.Compare(b.Status, a.Status), cmp.Compare(b.MaxLagSeconds, a.MaxLagSeconds),
			cmp.Compare(b.TotalLag, a.TotalLag), cmp.Compare(a.Group, b.Group))
	})
}

// judge measures and judges one partition of group g.
func (t *Tracker) judge(g string, o Committed, now int64, withWindow bool) PartitionLag {
	pl := PartitionLag{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, CommitTime: o.CommitTime}
	k := tp{o.Topic, o.Partition}
	entries, tsOffset, ts := t.snapshot(g, k)
	pl.Complete = float64(len(entries)) / float64(t.cfg.Window)
	if withWindow {
		pl.Window = entries
	}
	start, end, err := t.log.Offsets(o.Topic, o.Partition)
	if err != nil {
		pl.Status, pl.Error = Error, err.Error()
		return pl
	}
	pl.LogStart, pl.End = start, end
	pl.Lag = max(end-o.Offset, 0)
	if pl.Lag > 0 && o.Offset < start {
		pl.Status = Error
		pl.Error = "records below the log start offset were removed before the group consumed them"
	}
	if pl.Lag > 0 {
		from := max(o.Offset, start)
		if from != tsOffset {
			got, ok, err := t.log.Timestamp(o.Topic, o.Partition, from)
			switch {
			case err != nil:
				got = -1
			case !ok:
				got = now
			}
			ts = got
			if got >= 0 {
				t.cacheTimestamp(g, k, from, got)
			}
		}
		if ts >= 0 {
			pl.LagSeconds = float64(max(now-ts, 0)) / 1000
		}
	}
	if pl.Status != Error {
		pl.Status = evaluate(entries, pl.Lag, now, t.cfg.StoppedAfter.Milliseconds(), o.CommitTime)
	}
	return pl
}
