package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
)

// errMergeInput marks an input that cannot be merged (its bytes are not
// what its record says); it is left alone from then on.
type errMergeInput struct {
	x   *extent
	err error
}

func (e *errMergeInput) Error() string { return e.err.Error() }
func (e *errMergeInput) Unwrap() error { return e.err }

// mergePack merges runs into one object and swaps it in. It returns how
// many runs were merged (runs that went stale are skipped).
func (e *Engine) mergePack(ctx context.Context, runs []*packRun, buf *mergeBuffers) (int, error) {
	runs = slices.DeleteFunc(slices.Clone(runs), func(r *packRun) bool {
		r.p.mu.RLock()
		defer r.p.mu.RUnlock()
		return r.p.currentRun(r.in) < 0
	})
	if len(runs) == 0 {
		return 0, nil
	}
	body, exts, err := e.buildMerged(ctx, runs, buf)
	if err == errMergeStale {
		return 0, nil // an input was released meanwhile; the next plan sees it
	}
	var bad *errMergeInput
	if errors.As(err, &bad) {
		e.log.Warn("leaving an extent out of merges: its data does not match its record",
			"object", bad.x.obj.key, "base", bad.x.Base, "err", bad.err)
		e.mergeBad[bad.x] = true
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	key, gen, err := e.nextObjectKey(ctx)
	if err != nil {
		return 0, err
	}
	if err := e.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return 0, fmt.Errorf("put %s: %w", key, err)
	}
	e.m.objectBytes.Add(float64(len(body)))
	if err := e.mergeHookAt("put"); err != nil {
		return 0, err
	}

	// Register and swap under rewriteMu, after checking the runs are
	// still what the partitions hold: compaction, the other rewriter,
	// registers only on the same terms, so meta never holds two
	// registered extents that overlap without one superseding the other.
	e.rewriteMu.Lock()
	defer e.rewriteMu.Unlock()
	var keep []int
	var walSeq uint64
	for i, r := range runs {
		r.p.mu.RLock()
		ok := r.p.currentRun(r.in) >= 0
		r.p.mu.RUnlock()
		if ok {
			keep = append(keep, i)
			for _, x := range r.in {
				walSeq = max(walSeq, x.obj.walSeq)
			}
		}
	}
	if len(keep) == 0 {
		_ = e.store.Delete(ctx, key)
		return 0, nil
	}
	rec := objectRecord{Gen: gen, WALSeq: walSeq, Size: int64(len(body)), Extents: make([]segment.Extent, len(keep))}
	for j, i := range keep {
		rec.Extents[j] = exts[i]
	}
	if err := e.md.Txn(ctx, nil, meta.Put(keyObjects+key, encodeObject(&rec))); err != nil {
		_ = e.store.Delete(ctx, key) // an orphan if this fails too: deleted at Open
		return 0, fmt.Errorf("register merged object: %w", err)
	}
	if err := e.mergeHookAt("registered"); err != nil {
		return 0, err
	}
	o := &object{key: key, gen: gen, walSeq: walSeq, size: rec.Size}
	e.addObject(o, len(keep))
	var inputs, merged int64
	delta := 0
	for j, i := range keep {
		r := runs[i]
		nx := &extent{Extent: rec.Extents[j], obj: o}
		dead := r.p.swapRun(r.in, nx)
		if dead == nil {
			e.releaseExtents([]*extent{nx})
			continue
		}
		e.releaseExtents(dead)
		delta += 1 - len(dead)
		inputs += int64(len(dead))
		merged += nx.Size
	}
	e.mm.merges.Inc()
	e.mm.inputs.Add(float64(inputs))
	e.mm.bytes.Add(float64(merged))
	e.mm.extents.Add(float64(delta))
	return len(keep), nil
}

// errMergeStale: an input object was released since the runs were
// checked.
var errMergeStale = errors.New("log: merge input released")

// pinObjects takes a reference on every object (so none is collected
// while a merge reads it), unless one has none left: then it takes
// nothing and returns false.
func (e *Engine) pinObjects(objs []*object) bool {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	for _, o := range objs {
		if o.live <= 0 {
			return false
		}
	}
	for _, o := range objs {
		o.live++
	}
	return true
}

// unpinObjects drops pinObjects' references, queueing objects left with
// none for collection as releaseExtents does.
func (e *Engine) unpinObjects(objs []*object) {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	for _, o := range objs {
		if o.live--; o.live == 0 {
			e.unlinked = append(e.unlinked, o)
		}
	}
}

// mergeHookAt lets tests stop a merge at a stage as a crash would.
func (e *Engine) mergeHookAt(stage string) error {
	if e.mergeHook == nil {
		return nil
	}
	return e.mergeHook(stage)
}

// currentRun reports where in (a run of the partition's extents, oldest
// first) still sits in p.extents: the index of its first extent at or
// above the log start, or -1 if the run is gone (the partition deleted,
// an extent replaced, or all of it below the log start). Extents below
// the log start are released by retention and DeleteRecords, which only
// ever drop the oldest. Caller holds p.mu.
func (p *Partition) currentRun(in []*extent) int {
	if p.deleted {
		return -1
	}
	ls := p.logStart.Load()
	k := 0
	for k < len(in) && in[k].Last < ls {
		k++
	}
	if k == len(in) {
		return -1
	}
	xs := p.extents
	i := sort.Search(len(xs), func(i int) bool { return xs[i].Base >= in[k].Base })
	if i+len(in)-k > len(xs) {
		return -1
	}
	for j, x := range in[k:] {
		if xs[i+j] != x {
			return -1
		}
	}
	return i
}

// swapRun replaces the run in with nx in p.extents (with a fresh slice:
// readers hold the old one) and returns the extents it took out, or nil
// if the run is gone.
func (p *Partition) swapRun(in []*extent, nx *extent) []*extent {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.currentRun(in)
	if i < 0 {
		return nil
	}
	k := 0
	for in[k].Last < p.logStart.Load() {
		k++
	}
	n := len(in) - k
	xs := make([]*extent, 0, len(p.extents)-n+1)
	xs = append(xs, p.extents[:i]...)
	xs = append(xs, nx)
	xs = append(xs, p.extents[i+n:]...)
	p.extents = xs
	return in[k:]
}

// beginRewrite takes rewriteMu for registering an object that replaces
// the run in of p's extents (compaction), if the run is still what p
// holds; otherwise it takes nothing and returns false. endRewrite ends it.
func (e *Engine) beginRewrite(p *Partition, in []*extent) bool {
	e.rewriteMu.Lock()
	p.mu.RLock()
	ok := p.currentRun(in) >= 0
	p.mu.RUnlock()
	if !ok {
		e.rewriteMu.Unlock()
	}
	return ok
}

func (e *Engine) endRewrite() {
	if !e.shared() {
		e.rewriteMu.Unlock()
	}
}
