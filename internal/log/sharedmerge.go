package log

// What the cluster roll (sharedroll.go) merges and how it reads it.
//
// A flush object holds one extent of every partition the group commit
// touched, so with thousands of partitions written at random each
// partition gains an extent every few flushes and each merged object holds
// a few records of thousands of partitions. Merging only flush extents
// left every merged extent in place for good: a partition written a record
// a second gained a merged extent a minute, without end. Small merged
// extents (under mergeSmall) are merged again, so a partition keeps a few
// small extents at each size up to mergeSmall and otherwise extents of
// about PackedObjectBytes: its extent count follows its bytes, not its age.
//
// The inputs are read an object at a time, not an extent at a time: the
// extents of one merge usually sit next to each other in a few flush
// objects (one group commit wrote them all), so a merge of thousands of
// partitions costs one GET per input object (a few when its extents are
// far apart), not one per extent.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// mergeable reports whether the roll merges x with its neighbours: a flush
// extent, or a merged one still small.
func (e *Engine) mergeable(x *extent) bool {
	switch x.obj.walSeq {
	case walSeqFlush:
		return !x.obj.wal
	case walSeqMerged:
		return !x.obj.wal && x.Size < e.mergeSmall()
	}
	return false
}

// mergeSmall is the size under which a merged extent is merged again.
func (e *Engine) mergeSmall() int64 { return e.cfg.PackedObjectBytes / 4 }

// mergeGap is the most bytes between two input extents of one object that
// are read (and thrown away) to read both in one request.
const mergeGap = 256 << 10

// mergeReads is how many input reads of one merge run at once.
const mergeReads = 8

// mergeData reads every extent of runs, a request per object (or per
// stretch of it whose extents are within mergeGap of each other).
func (e *Engine) mergeData(ctx context.Context, runs []*mergeRun) (map[*extent][]byte, error) {
	byObj := map[*object][]*extent{}
	for _, r := range runs {
		for _, x := range r.exts {
			byObj[x.obj] = append(byObj[x.obj], x)
		}
	}
	type span struct {
		obj   *object
		start int64
		end   int64
		exts  []*extent
	}
	var spans []span
	for o, xs := range byObj {
		slices.SortFunc(xs, func(a, b *extent) int { return cmp.Compare(a.Pos, b.Pos) })
		cur := span{obj: o, start: xs[0].Pos, end: xs[0].Pos + xs[0].Size, exts: xs[:1]}
		for _, x := range xs[1:] {
			if x.Pos-cur.end <= mergeGap {
				cur.end = max(cur.end, x.Pos+x.Size)
				cur.exts = append(cur.exts, x)
				continue
			}
			spans = append(spans, cur)
			cur = span{obj: o, start: x.Pos, end: x.Pos + x.Size, exts: []*extent{x}}
		}
		spans = append(spans, cur)
	}
	out := make(map[*extent][]byte)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, mergeReads)
	var wg sync.WaitGroup
	for _, sp := range spans {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			buf := make([]byte, sp.end-sp.start)
			err := e.store.ReadAt(ctx, sp.obj.key, buf, sp.start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("%w: merging: read %s: %v", ErrStorage, sp.obj.key, err)
				}
				return
			}
			for _, x := range sp.exts {
				out[x] = buf[x.Pos-sp.start : x.Pos-sp.start+x.Size]
			}
		})
	}
	wg.Wait()
	return out, firstErr
}
