package log

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// The merge of small extents (single node). A roll gives every partition
// with data in a WAL segment one extent of it, so a broker whose segments
// are spread over many partitions gains that many extents per roll:
// memory that grows with history, reads that walk thousands of tiny
// extents, and segments that stay on disk until the last of their
// partitions lets go of them.
//
// A background goroutine merges them as a log-structured merge tree
// merges its runs (docs/formats.md, section 3.2): per partition, oldest
// first, extents are grouped into levels by size (log base fan-in), and
// fan-in adjacent extents of one level are rewritten as one extent of the
// next level, so each byte is rewritten about once per level. One pass
// writes one packed object (many partitions, sorted by topic ID and
// partition, at most MergeObjectBytes), registers it in meta with a gen
// above its inputs' (registration is the atomic swap: at Open an extent
// wholly inside a newer one's range is superseded), swaps the merged
// extents into the partitions and releases the inputs; objects left with
// no live extent are garbage collected. Objects mostly dead but kept alive
// by a few extents that have nothing to merge with yet are emptied by
// merging those extents anyway.
//
// It runs apart from the roller, which producers wait for when it falls
// behind: a merge pass can take a while, and the roller must never wait
// for one. Passes yield to a roller with segments queued, and are paced
// (a duty cycle and MergeBytesPerSec).

const (
	// defaultMergeFanIn: extents of one level merged at a time.
	defaultMergeFanIn = 8
	// mergeFloorBytes: extents smaller than this are all one level,
	// the lowest (rewriting them is cheap; levels below it would only
	// add extents).
	mergeFloorBytes = 4 << 10
	// mergeLevelSpan: extents within this many levels (log base fan-in)
	// of the largest one left are taken as one level, as Lucene's
	// LogMergePolicy does, so that sizes varying a little from roll to
	// roll still merge.
	mergeLevelSpan = 0.75
	// mergeSparse: an object with less than 1/mergeSparse of its bytes
	// in live extents has them merged whatever their level, so that it
	// can be deleted.
	mergeSparse = 4
	// mergeSparseMin: and only if that frees at least this much (a small
	// object costs little to keep; its extents merge in their turn).
	mergeSparseMin = 1 << 20
	// mergeSparseAge: and only once it is this many times fan-in WAL
	// segments old: until then, what is left in it is mostly extents
	// that merge by level soon (a partition a segment or two short of
	// fan-in), and reading the object for them alone would be wasted.
	mergeSparseAge = 2
	// mergeTick: merges are looked for after every roll and at least
	// this often (retention and DeleteRecords leave objects sparse too).
	mergeTick = 30 * time.Second
	// mergeInputMaxBytes: extents this large or larger are never merged
	// by level. An extent costs about a hundred bytes of memory and one
	// read per fetch that crosses it, nothing next to a megabyte of data,
	// while merging it rewrites the megabyte: with a few busy partitions
	// (8 partitions, 64 MiB segments: extents of 8 MiB) the merge took a
	// fifth of the broker's CPU and doubled what was written to disk, for
	// nothing. Below it, extents merge level by level as before, so the
	// tiny extents of thousands of partitions still become a few large
	// ones.
	mergeInputMaxBytes = 1 << 20
	// mergeSpanShare: a merged extent spans at most retention.ms (and
	// holds at most retention.bytes) divided by this, so retention,
	// which deletes whole extents, keeps at most that share more than
	// it is asked to.
	mergeSpanShare = 8
)

// mergePolicy is how one topic's extents are merged.
type mergePolicy struct {
	fanIn    int
	floor    float64       // level of mergeFloorBytes
	maxBytes int64         // largest extent a merge may make; larger ones are left alone
	inputMax int64         // extents this large are left alone (0: only maxBytes bounds)
	maxSpan  int64         // largest MaxTS span of a merged extent in ms (0: none)
	pl       *mergePlanner // scratch, if any
}

func (e *Engine) mergePolicy(cfg *topicconfig.Config) mergePolicy {
	k := e.cfg.MergeFanIn
	maxBytes := e.cfg.MergeObjectBytes
	if cfg.SegmentBytes > 0 {
		maxBytes = min(maxBytes, cfg.SegmentBytes)
	}
	if cfg.RetentionBytes > 0 {
		maxBytes = min(maxBytes, cfg.RetentionBytes/mergeSpanShare)
	}
	var span int64
	if cfg.SegmentMs > 0 {
		span = cfg.SegmentMs
	}
	if cfg.RetentionMs > 0 && (span == 0 || cfg.RetentionMs/mergeSpanShare < span) {
		span = max(cfg.RetentionMs/mergeSpanShare, 1)
	}
	return mergePolicy{fanIn: k, floor: math.Log(mergeFloorBytes) / math.Log(float64(k)), maxBytes: maxBytes,
		inputMax: mergeInputMaxBytes, maxSpan: span}
}

func (pol *mergePolicy) level(x *extent) float64 {
	return math.Log(float64(max(x.Size, 1))) / math.Log(float64(pol.fanIn))
}

// small reports whether x may be merged at all.
func (pol *mergePolicy) small(x *extent) bool {
	return x.Size < pol.maxBytes && (pol.inputMax <= 0 || x.Size < pol.inputMax)
}

// fits reports whether xs[i:j] may become one extent: it is no larger
// than maxBytes and spans no more than maxSpan. Timestamps are taken to
// grow with offsets (as they do with LogAppendTime, or producers that
// stamp the current time), so a run's records are no older than the
// extent before it; the oldest extent has no such bound when it is a
// merged one, and is not merged again with others.
func (pol *mergePolicy) fits(xs []*extent, i, j int) bool {
	var size int64
	for _, x := range xs[i:j] {
		size += x.Size
	}
	if size > pol.maxBytes {
		return false
	}
	if pol.maxSpan <= 0 || j-i == 1 {
		return true
	}
	from := xs[i].MaxTS
	if i > 0 {
		from = xs[i-1].MaxTS
	} else if !xs[0].obj.wal {
		return false
	}
	to := xs[j-1].MaxTS
	return from == math.MinInt64 || to == math.MinInt64 || to-from <= pol.maxSpan
}

// span is a run [i, j) of a partition's extents to merge.
type span struct{ i, j int }

// plan returns the runs of xs (one partition's extents, oldest first) to
// merge by level, appended to out. Large extents split the list; within
// each stretch of small ones, from the oldest: the level of the largest
// extent left, less mergeLevelSpan, bounds a group that reaches to the
// newest extent at or above that bound; the group is merged fan-in
// extents at a time (fewer where fan-in would be too large or span too
// long), and what is left of it (fewer) waits. Every level therefore
// holds fewer than about fan-in extents, and each merge climbs at least
// one level.
func (pol *mergePolicy) plan(xs []*extent, out []span) []span {
	// The oldest extent, once merged, stays as it is under a span limit
	// (see fits).
	barrier := func(i int) bool { return !pol.small(xs[i]) || i == 0 && pol.maxSpan > 0 && !xs[0].obj.wal }
	for s := 0; s < len(xs); {
		if barrier(s) {
			s++
			continue
		}
		end := s
		for end < len(xs) && !barrier(end) {
			end++
		}
		out = pol.planLevels(xs, s, end, out)
		s = end
	}
	return out
}

func (pol *mergePolicy) planLevels(xs []*extent, s, end int, out []span) []span {
	if end-s < pol.fanIn {
		return out
	}
	xs = xs[:end]
	base := s
	var lv, top []float64 // lv[i]: level of xs[base+i]; top[i]: the largest level in xs[base+i:]
	if pol.pl != nil {
		pol.pl.lv, pol.pl.top = slices.Grow(pol.pl.lv[:0], end-base)[:end-base], slices.Grow(pol.pl.top[:0], end-base)[:end-base]
		lv, top = pol.pl.lv, pol.pl.top
	} else {
		lv, top = make([]float64, end-base), make([]float64, end-base)
	}
	for i := end - 1; i >= base; i-- {
		lv[i-base] = pol.level(xs[i])
		top[i-base] = lv[i-base]
		if i+1 < end {
			top[i-base] = max(top[i-base], top[i+1-base])
		}
	}
	for s < end {
		maxL := top[s-base]
		bottom := maxL - mergeLevelSpan
		if maxL <= pol.floor {
			bottom = math.Inf(-1)
		} else if bottom < pol.floor {
			bottom = pol.floor
		}
		upto := end - 1
		for upto >= s && lv[upto-base] < bottom {
			upto--
		}
		for s+pol.fanIn <= upto+1 {
			// fan-in extents, or as many of them as fit together.
			j := s + pol.fanIn
			for j-s >= 2 && !pol.fits(xs, s, j) {
				j--
			}
			if j-s < 2 {
				s++
				continue
			}
			out = append(out, span{s, j})
			s = j
		}
		s = upto + 1
	}
	return out
}

// evacuate adds to out, for every extent of xs in a sparse object and in
// no planned run, a run of it and its unplanned neighbours of no higher
// level: merged, even alone, it no longer keeps the object alive.
func (pol *mergePolicy) evacuate(xs []*extent, planned map[*extent]bool, sparse func(*extent) bool, limit int64, out []span) []span {
	taken := func(i int) bool { return planned[xs[i]] }
	for i := 0; i < len(xs); i++ {
		x := xs[i]
		if taken(i) || !sparse(x) || x.Size > limit {
			continue
		}
		lx := pol.level(x)
		l, r := i, i+1
		for l > 0 && !taken(l-1) && pol.level(xs[l-1]) <= lx && pol.fits(xs, l-1, r) {
			l--
		}
		for r < len(xs) && !taken(r) && pol.level(xs[r]) <= lx && pol.fits(xs, l, r+1) {
			r++
		}
		for k := l; k < r; k++ {
			planned[xs[k]] = true
		}
		out = append(out, span{l, r})
		i = r - 1
	}
	return out
}

// packRun is one partition's run of extents to merge into one.
type packRun struct {
	p     *Partition
	in    []*extent
	bytes int64
}

// mergePlanner is the merge goroutine's planning state, reused from plan
// to plan.
type mergePlanner struct {
	scan  uint64
	spans []span
	lv    []float64
	top   []float64
}

// planMerges looks at every partition's extents and returns the runs to
// merge, sorted by topic ID, partition and offset. It also sets the
// extents gauge. Caller holds mergeMu.
func (e *Engine) planMerges() []*packRun {
	pl := &e.planner
	pl.scan++
	e.mu.RLock()
	topics := make([]*topic, 0, len(e.topics))
	for _, t := range e.topics {
		topics = append(topics, t)
	}
	e.mu.RUnlock()
	enabled := e.cfg.MergeFanIn > 0
	// account adds x's bytes to its object's live bytes (the first time
	// in this plan that the object is seen, from 0).
	account := func(x *extent, n int64) {
		o := x.obj
		if o.merge.scan != pl.scan {
			o.merge.scan, o.merge.live, o.merge.sparse = pl.scan, 0, false
		}
		o.merge.live += n
	}
	var runs []*packRun
	planned := map[*Partition]int{} // a partition's first run
	add := func(p *Partition, xs []*extent, sp []span) {
		for _, s := range sp {
			r := &packRun{p: p, in: xs[s.i:s.j:s.j]}
			for _, x := range r.in {
				r.bytes += x.Size
				account(x, -x.Size)
				if len(e.mergeBad) > 0 && e.mergeBad[x] {
					r = nil
					break
				}
			}
			if r != nil {
				if _, ok := planned[p]; !ok {
					planned[p] = len(runs)
				}
				runs = append(runs, r)
			}
		}
	}
	total := 0
	for _, t := range topics {
		cfg := t.cfg.Load()
		pol := mergePolicy{}
		if enabled {
			pol = e.mergePolicy(cfg)
			pol.pl = pl
		}
		for _, p := range t.partitions() {
			p.mu.RLock()
			xs, gone := p.extents, p.deleted
			p.mu.RUnlock()
			if gone {
				continue
			}
			total += len(xs)
			for _, x := range xs {
				account(x, x.Size)
			}
			if !enabled || cfg.Compact || len(xs) < pol.fanIn {
				continue
			}
			pl.spans = pol.plan(xs, pl.spans[:0])
			add(p, xs, pl.spans)
		}
	}
	e.mm.extents.Set(float64(total))
	if !enabled {
		return nil
	}
	anySparse := false
	e.objMu.Lock()
	var newest uint64
	for _, o := range e.objects {
		newest = max(newest, o.walSeq)
	}
	for _, o := range e.objects {
		if o.merge.scan == pl.scan {
			n := o.merge.live
			o.merge.sparse = n > 0 && n*mergeSparse < o.size && o.size-n >= mergeSparseMin &&
				o.walSeq+mergeSparseAge*uint64(e.cfg.MergeFanIn) <= newest
			anySparse = anySparse || o.merge.sparse
		}
	}
	e.objMu.Unlock()
	if anySparse {
		// Runs planned above are ruled out by pointer: the partition
		// may have rolled since, so its list may have grown.
		sparse := func(x *extent) bool { return x.obj.merge.scan == pl.scan && x.obj.merge.sparse }
		n := len(runs)
		for _, t := range topics {
			cfg := t.cfg.Load()
			if cfg.Compact {
				continue
			}
			pol := e.mergePolicy(cfg)
			pol.pl = pl
			for _, p := range t.partitions() {
				p.mu.RLock()
				xs, gone := p.extents, p.deleted
				p.mu.RUnlock()
				if gone || !slices.ContainsFunc(xs, sparse) {
					continue
				}
				taken := map[*extent]bool{}
				if i, ok := planned[p]; ok {
					for ; i < n && runs[i].p == p; i++ {
						for _, x := range runs[i].in {
							taken[x] = true
						}
					}
				}
				pl.spans = pol.evacuate(xs, taken, sparse, e.cfg.MergeObjectBytes, pl.spans[:0])
				add(p, xs, pl.spans)
			}
		}
	}
	slices.SortFunc(runs, func(a, b *packRun) int {
		if c := bytes.Compare(a.p.t.id[:], b.p.t.id[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.id, b.p.id); c != 0 {
			return c
		}
		return cmp.Compare(a.in[0].Base, b.in[0].Base)
	})
	return runs
}

// mergeLoop runs merges after every roll and every mergeTick.
func (e *Engine) mergeLoop() {
	defer e.bg.Done()
	t := time.NewTicker(mergeTick)
	defer t.Stop()
	for {
		e.objMu.Lock()
		rolled := e.rollDone
		e.objMu.Unlock()
		select {
		case <-rolled:
		case <-t.C:
		case <-e.ctx.Done():
			return
		}
		if err := e.mergeAll(e.ctx, true); err != nil && e.ctx.Err() == nil {
			e.log.Warn("merging small extents failed; the next pass retries", "err", err)
		}
	}
}

// mergeAll merges until nothing is left to merge. paced: yield to the
// roller and keep to the duty cycle and MergeBytesPerSec between objects
// (tests merge unpaced).
func (e *Engine) mergeAll(ctx context.Context, paced bool) error {
	e.mergeMu.Lock()
	defer e.mergeMu.Unlock()
	buf := &e.mergeBuf
	for round := 0; ; round++ {
		runs := e.planMerges()
		if len(runs) == 0 {
			if round == 0 {
				*buf = mergeBuffers{} // idle: give the buffers back
			}
			return nil
		}
		progress := false
		for len(runs) > 0 {
			n, size := 0, int64(0)
			for n < len(runs) && n < maxExtentsPerObject && (n == 0 || size+runs[n].bytes <= e.cfg.MergeObjectBytes) {
				size += runs[n].bytes
				n++
			}
			if paced && !e.mergeYield(ctx) {
				return ctx.Err()
			}
			start := time.Now()
			merged, err := e.mergePack(ctx, runs[:n], buf)
			if err != nil {
				return err
			}
			progress = progress || merged > 0
			runs = runs[n:]
			if paced && !e.mergePace(ctx, time.Since(start), size) {
				return ctx.Err()
			}
		}
		if !progress {
			return nil // everything planned went stale; the next trigger plans again
		}
	}
}

// mergeYield waits while the roller has more than one segment queued: the
// roller is what producers wait for. It returns false if ctx ended.
func (e *Engine) mergeYield(ctx context.Context) bool {
	for {
		e.objMu.Lock()
		n, ch := len(e.rollQueue), e.rollDone
		e.objMu.Unlock()
		if n <= 1 {
			return ctx.Err() == nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// mergePace waits after a merge object that took work and wrote size
// bytes: at least as long as the work (the merge uses at most half a
// core, and half the disk's time), and long enough to keep to
// MergeBytesPerSec. It returns false if ctx ended.
func (e *Engine) mergePace(ctx context.Context, work time.Duration, size int64) bool {
	wait := work
	if r := e.cfg.MergeBytesPerSec; r > 0 {
		wait = max(wait, time.Duration(float64(size)/float64(r)*float64(time.Second))-work)
	}
	e.mm.seconds.Add(work.Seconds())
	if wait <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
