package log

import (
	"context"
	"runtime"
	"time"
)

// pacer keeps one pass of the clean loop (retention, compaction, object
// GC) to a share of the time and, for compaction, to a byte rate, so that
// however far behind the pass is, it leaves the rest of the machine to
// appends, reads and the roller (which is never paced: the WAL's
// backpressure waits for it). Wall time, not CPU time, is what is shared:
// a pass waiting on the disk or the meta store is busy too, so the share
// bounds its I/O as well, and a pass slowed by a loaded machine rests
// longer. A pacer is for one goroutine; nil paces nothing.
type pacer struct {
	ctx   context.Context
	share float64 // of wall time busy; >= 1: no rests
	rate  int64   // bytes/s; <= 0: unpaced
	start time.Time
	bytes int64 // read or written since start
}

// rest is how long to rest after busy of work in the current slice (0:
// none yet): enough for the share once a slice is done, and for the byte
// rate once that is at least a tenth of a slice.
func (p *pacer) rest(busy time.Duration) time.Duration {
	var rest time.Duration
	if p.share > 0 && p.share < 1 && busy >= paceSlice {
		rest = time.Duration(float64(busy) * (1 - p.share) / p.share)
	}
	if p.rate > 0 {
		if owed := time.Duration(float64(p.bytes)/float64(p.rate)*float64(time.Second)) - busy; owed > rest {
			rest = owed
		}
	}
	if rest < paceSlice/10 {
		return 0
	}
	return rest
}

// yield lets other goroutines run, then paces: the call between
// partitions.
func (p *pacer) yield() bool {
	runtime.Gosched()
	return p.pace(0)
}

// paceSlice is the work a pacer lets run before it rests.
const paceSlice = 10 * time.Millisecond

// newPacer starts a pacer at Config.CleanerShare and rate bytes/s (<= 0:
// no byte pacing).
func (e *Engine) newPacer(ctx context.Context, rate int64) *pacer {
	return &pacer{ctx: ctx, share: e.cfg.CleanerShare, rate: rate, start: time.Now()}
}

// pace is called between units of work, n the bytes the last one read or
// wrote (or the next will). Once a slice of work is done it rests as long
// as the share and the rate require. It returns false if ctx ended.
func (p *pacer) pace(n int64) bool {
	if p == nil {
		return true
	}
	if p.ctx.Err() != nil {
		return false
	}
	p.bytes += n
	busy := time.Since(p.start)
	rest := p.rest(busy)
	if rest == 0 {
		if busy >= paceSlice { // no credit carried past a slice
			p.start, p.bytes = time.Now(), 0
		}
		return true
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
		return false
	}
	p.start, p.bytes = time.Now(), 0
	return true
}
