package log

import (
	"sync/atomic"
	"time"
)

// WAL backpressure from the roll queue (single node).
//
// Unrolled WAL data is in memory and replayed at restart, so the closed
// segments waiting for the roller are bounded: past MaxPendingSegments
// enqueueRoll blocks the WAL writer outright (the hard stall). Before that,
// walDelay slows the writer down gradually, as RocksDB's delayed write rate
// does ahead of its write stop: once the unrolled data passes the soft
// threshold (half of MaxPendingSegments), the writer waits before each
// group commit for as long as writing the group at a reduced rate would
// take. The rate is what the roller has been managing, scaled by (1-x)/x,
// where x is how far the unrolled data is from the soft threshold (0) to
// the hard limit (1): far above the roller's speed just past the
// threshold, equal to it halfway, and falling to nothing at the limit. The
// writer asks again every wal.DelaySlice, so the wait follows the roller's
// progress. Appends wait a little longer, and join bigger groups, rather
// than stop; the writer settles at the roller's pace halfway up; and the
// hard stall is reached only if the roller all but stops.

// maxWALDelay bounds one group commit's wait. Past it the roller is all
// but stopped, and the hard stall is near.
const maxWALDelay = time.Second

// rollEWMA weighs the latest roll in the roller's moving-average speed.
const rollEWMA = 0.3

// pendingRoll is a closed WAL segment waiting for the roller.
type pendingRoll struct {
	seq   uint64
	bytes int64
}

// rollPressure is the state walDelay reads.
type rollPressure struct {
	open     atomic.Int64 // bytes written to the open segment (writer goroutine)
	segments atomic.Int64 // closed segments waiting: len(Engine.rollQueue), set under objMu
	pending  atomic.Int64 // their bytes, set under objMu

	waited time.Duration // the group commit being held back (writer goroutine)

	// Guarded by Engine.objMu.
	rollStart time.Time // when the roller took the head segment; zero: idle
	rate      float64   // bytes/s of recent rolls (moving average); 0: none yet
}

// queueRoll adds closed segment seq of size bytes to the roll queue and
// returns the queue's length.
func (e *Engine) queueRoll(seq uint64, bytes int64) int {
	e.objMu.Lock()
	e.rollQueue = append(e.rollQueue, pendingRoll{seq: seq, bytes: bytes})
	n := len(e.rollQueue)
	e.setRollPending(n, bytes)
	e.objMu.Unlock()
	return n
}

// takeRoll returns the head of the roll queue, noting when the roller
// started on it, or false if the queue is empty.
func (e *Engine) takeRoll() (pendingRoll, bool) {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	if len(e.rollQueue) == 0 {
		return pendingRoll{}, false
	}
	if e.bp.rollStart.IsZero() {
		e.bp.rollStart = time.Now()
	}
	return e.rollQueue[0], true
}

// rolled drops the head of the roll queue once it is rolled, wakes a
// writer stalled on the queue, and folds the roll's speed into the
// roller's average.
func (e *Engine) rolled(r pendingRoll) {
	now := time.Now()
	e.objMu.Lock()
	d := now.Sub(e.bp.rollStart)
	e.bp.rollStart = time.Time{}
	if d > 0 && r.bytes > 0 {
		v := float64(r.bytes) / d.Seconds()
		if e.bp.rate == 0 {
			e.bp.rate = v
		} else {
			e.bp.rate += rollEWMA * (v - e.bp.rate)
		}
	}
	e.rollQueue = e.rollQueue[1:]
	e.setRollPending(len(e.rollQueue), -r.bytes)
	close(e.rollDone)
	e.rollDone = make(chan struct{})
	e.objMu.Unlock()
	e.m.rollSeconds.Observe(d.Seconds())
	e.rolledUpTo.Store(r.seq)
}

// setRollPending publishes the roll queue's length n after its bytes
// changed by delta. The caller holds objMu, so that updates land in order.
func (e *Engine) setRollPending(n int, delta int64) {
	e.bp.segments.Store(int64(n))
	e.m.rollPending.Set(float64(n))
	e.m.rollBytesPending.Set(float64(e.bp.pending.Add(delta)))
}

// rollDebt is how far the unrolled WAL data is between the soft threshold
// (0) and the hard limit (1), in segments: the closed ones waiting and,
// counted by size so that the measure grows smoothly, the open one.
func (e *Engine) rollDebt() float64 {
	limit := e.cfg.MaxPendingSegments
	soft := float64(max(1, limit/2))
	hard := float64(limit + 1) // the open segment closing past the limit stalls
	n := float64(e.bp.segments.Load())
	b := float64(e.bp.pending.Load()+e.bp.open.Load()) / float64(e.cfg.WALSegmentBytes)
	x := (max(n, b) - soft) / (hard - soft)
	return min(max(x, 0), 1)
}

// walDelay is the WAL writer's Delay hook: how much longer to hold back a
// group commit of n bytes that has waited so long already. Asked again
// every wal.DelaySlice, it follows the roller: a roll that completes
// shortens the wait at once. See the top of this file.
func (e *Engine) walDelay(n int64, waited time.Duration) time.Duration {
	if waited > 0 {
		e.m.walDelaySeconds.Add((waited - e.bp.waited).Seconds())
	}
	e.bp.waited = waited
	d := e.groupDelay(n) - waited
	if d <= 0 {
		return 0
	}
	if waited == 0 {
		e.m.walDelays.Inc()
	}
	return d
}

// groupDelay is how long a group commit of n bytes should wait in all.
func (e *Engine) groupDelay(n int64) time.Duration {
	x := e.rollDebt()
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return maxWALDelay
	}
	e.objMu.Lock()
	rate, start := e.bp.rate, e.bp.rollStart
	var head int64
	if len(e.rollQueue) > 0 {
		head = e.rollQueue[0].bytes
	}
	e.objMu.Unlock()
	// A roll running longer than the average says the roller is slower
	// now (or stuck): the speed it shows on it is the bound.
	if el := time.Since(start); !start.IsZero() && el > 0 {
		if v := float64(head) / el.Seconds(); rate == 0 || v < rate {
			rate = v
		}
	}
	if rate <= 0 {
		return 0
	}
	if s := float64(n) * x / (rate * (1 - x)); s < maxWALDelay.Seconds() {
		return time.Duration(s * float64(time.Second))
	}
	return maxWALDelay
}

// RollBacklog is the roll queue now: closed WAL segments waiting to be
// rolled into objects, their bytes, and the most that may wait before
// producers are held back (MaxPendingSegments).
func (e *Engine) RollBacklog() (segments int, bytes int64, limit int) {
	return int(e.bp.segments.Load()), e.bp.pending.Load(), e.cfg.MaxPendingSegments
}
