package consumer

import (
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tracker follows the records of one partition that were handed out and
// not yet finished. The offset to commit is the lowest unfinished offset, or
// one past the last record handed out when every one is finished, so a crash
// re-delivers every record not yet finished and skips none.
//
// Records are added in offset order (the poll loop is the only adder);
// finish may come in any order from any goroutine.
type tracker struct {
	mu        sync.Mutex
	offs      []int64 // handed out, in increasing order; offs[:head] are finished
	done      []bool
	head      int
	base      int64 // sequence number of offs[0]: the n-th record handed out has n
	next      int64 // one past the last offset handed out; -1 before the first
	first     int64 // the first offset handed out, -1 before it
	committed int64 // last offset committed, -1 for none
	hwm       int64 // the partition's high watermark at the last fetch
}

func newTracker() *tracker { return &tracker{next: -1, first: -1, committed: -1} }

// add hands out off; offsets at or below the last one are ignored (a
// re-fetch after a reset) and add reports false for them.
func (t *tracker) add(off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next >= 0 && off < t.next {
		return false
	}
	t.offs = append(t.offs, off)
	t.done = append(t.done, false)
	t.next = off + 1
	return true
}

// addAll hands out offs, in increasing order, and returns the index of the
// first one taken (the ones before it were at or below the last offset) and
// its sequence number; the ones after it have the numbers that follow.
func (t *tracker) addAll(offs []int64, hwm int64) (int, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hwm = max(t.hwm, hwm)
	if t.first < 0 && len(offs) > 0 {
		t.first = offs[0]
	}
	seq := t.base + int64(len(t.offs))
	first := 0
	for first < len(offs) && t.next >= 0 && offs[first] < t.next {
		first++
	}
	for _, o := range offs[first:] {
		t.offs = append(t.offs, o)
		t.done = append(t.done, false)
	}
	if len(offs) > first {
		t.next = offs[len(offs)-1] + 1
	}
	return first, seq
}

// skipOldLocked returns recs without those at or below the last offset
// handed out (only at the front: a re-fetch after a reset), and notes the
// high watermark. The caller appends what it returns to offs and done, in
// order, and sets next. t.mu is held.
func (t *tracker) skipOldLocked(recs []*kgo.Record, hwm int64) []*kgo.Record {
	t.hwm = max(t.hwm, hwm)
	first := 0
	for first < len(recs) && t.next >= 0 && recs[first].Offset < t.next {
		first++
	}
	recs = recs[first:]
	if len(recs) > 0 {
		if t.first < 0 {
			t.first = recs[0].Offset
		}
		t.next = recs[len(recs)-1].Offset + 1
	}
	return recs
}

// finishSeqs marks the records with these sequence numbers done: no search.
func (t *tracker) finishSeqs(seqs []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range seqs {
		if i := s - t.base; i >= int64(t.head) && i < int64(len(t.offs)) {
			t.markLocked(int(i))
		}
	}
}

// finish marks off done.
func (t *tracker) finish(off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finishLocked(off)
}

func (t *tracker) finishLocked(off int64) {
	i := t.head + sort.Search(len(t.offs)-t.head, func(i int) bool { return t.offs[t.head+i] >= off })
	if i >= len(t.offs) || t.offs[i] != off {
		return
	}
	t.markLocked(i)
}

func (t *tracker) markLocked(i int) {
	t.done[i] = true
	for t.head < len(t.offs) && t.done[t.head] {
		t.head++
	}
	// Drop the finished prefix once it is at least half the slice, so the
	// slices stay proportional to what is in flight.
	if t.head > 64 && t.head*2 >= len(t.offs) {
		n := copy(t.offs, t.offs[t.head:])
		copy(t.done, t.done[t.head:])
		t.base += int64(t.head)
		t.offs, t.done, t.head = t.offs[:n], t.done[:n], 0
	}
}

// unfinishedBelow reports whether a record handed out before the one with
// sequence number seq is not finished.
func (t *tracker) unfinishedBelow(seq int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int64(t.head) < seq-t.base
}

// low is the offset below which every record handed out is finished, and
// false before the first record.
func (t *tracker) low() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.head < len(t.offs):
		return t.offs[t.head], true
	case t.next >= 0:
		return t.next, true
	}
	return 0, false
}

// mark is the offset to commit, and whether it moved since the last commit.
func (t *tracker) mark() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var m int64
	switch {
	case t.head < len(t.offs):
		m = t.offs[t.head]
	case t.next >= 0:
		m = t.next
	default:
		return 0, false
	}
	return m, m != t.committed
}

// committedAt records a successful commit of m.
func (t *tracker) committedAt(m int64) {
	t.mu.Lock()
	if m > t.committed {
		t.committed = m
	}
	t.mu.Unlock()
}

// commitLag is the high watermark minus the last commit (or the first
// offset handed out, before any commit).
func (t *tracker) commitLag() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	base := t.committed
	if base < 0 {
		base = t.first
	}
	if base < 0 {
		return 0, false
	}
	return max(t.hwm-base, 0), true
}

// inFlight is the number of records handed out and not finished.
func (t *tracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, d := range t.done[t.head:] {
		if !d {
			n++
		}
	}
	return n
}
