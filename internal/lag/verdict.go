package lag

import (
	"encoding/json"
	"fmt"
)

// Status is a verdict on a partition or a group. Larger is worse.
type Status int8

// The verdicts, from best to worst.
const (
	OK Status = iota
	Warning
	Rewind
	Stalled
	Stopped
	Error
)

var statusNames = [...]string{"OK", "WARNING", "REWIND", "STALLED", "STOPPED", "ERROR"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int8(s))
}

// MarshalJSON writes the status's name.
func (s Status) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a status's name.
func (s *Status) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return err
	}
	st, ok := ParseStatus(name)
	if !ok {
		return fmt.Errorf("unknown lag status %q", name)
	}
	*s = st
	return nil
}

// ParseStatus reads a status's name.
func ParseStatus(name string) (Status, bool) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), true
		}
	}
	return 0, false
}

// Entry is one commit in a partition's window.
type Entry struct {
	Offset int64 `json:"offset"`
	// Lag is the lag in records when the commit arrived: the high
	// watermark then minus Offset.
	Lag int64 `json:"lag"`
	// At is when the commit arrived, Unix milliseconds.
	At int64 `json:"at_ms"`
}

// evaluate judges one partition from its window (oldest first), its lag
// now and the time now (Unix ms). stoppedAfter is the least idle time that
// counts as stopped, whatever the window's span. The rules are Burrow's,
// with one change: a rewind after the consumer had caught up is reported
// (Burrow calls any window with a zero-lag commit OK, which hides a reset
// to earliest of a group that was keeping up). Worst first, once lag is
// known to persist:
//
//  1. no lag now: OK;
//  2. the committed offset went backwards since the last commit that saw
//     no lag (or anywhere in the window if none did): REWIND;
//  3. a commit in the window saw no lag: OK;
//  4. the time since the last commit exceeds both the window's span and
//     stoppedAfter: STOPPED;
//  5. two or more commits, all of the same offset: STALLED;
//  6. two or more commits and the lag never shrank between any two: WARNING;
//  7. otherwise OK.
//
// With no commit in the window (a restart emptied it), only rule 4 applies,
// measured from lastCommit (the group's stored commit time, Unix ms; 0 if
// unknown).
func evaluate(w []Entry, lagNow, now, stoppedAfter, lastCommit int64) Status {
	if lagNow <= 0 {
		return OK
	}
	if len(w) == 0 {
		if lastCommit > 0 && now-lastCommit > stoppedAfter {
			return Stopped
		}
		return OK
	}
	caughtUp := -1 // the last commit that saw no lag
	for i, e := range w {
		if e.Lag <= 0 {
			caughtUp = i
		}
	}
	for i := max(caughtUp, 0) + 1; i < len(w); i++ {
		if w[i].Offset < w[i-1].Offset {
			return Rewind
		}
	}
	if caughtUp >= 0 {
		return OK
	}
	first, last := w[0], w[len(w)-1]
	if idle := now - last.At; idle > last.At-first.At && idle > stoppedAfter {
		return Stopped
	}
	if len(w) < 2 {
		return OK
	}
	same, growing := true, true
	for i := 1; i < len(w); i++ {
		if w[i].Offset != w[i-1].Offset {
			same = false
		}
		if w[i].Lag < w[i-1].Lag {
			growing = false
		}
	}
	switch {
	case same:
		return Stalled
	case growing:
		return Warning
	}
	return OK
}
