package log

// What the cluster roll (sharedroll.go) merges and how it reads it.
//
// A flush object holds one extent of every partition the group commit
// touched, so with thousands of partitions written at random each
// partition gains an extent every few flushes. Flush extents are merged
// object by object (mergeFlushed): each roll reads every flush object once
// and writes about one merged object per 16 MiB, whatever the partition
// count. That leaves a slowly written partition one small merged extent
// per roll; merging only flush extents left those in place for good, one
// more a minute without end. Small merged extents (under mergeSmall) are
// merged again, four or more at a time, so a partition keeps a few small
// extents at each size up to mergeSmall and otherwise extents of about
// PackedObjectBytes: its extent count follows its bytes, not its age.
//
// Inputs are read a request per object (or per stretch of one whose
// extents are within sharedMergeGap of each other), not one per extent.

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// mergeable reports whether the roll merges x again with its neighbours:
// a merged extent still small. Flush extents are mergeFlushed's.
func (e *Engine) mergeable(x *extent) bool {
	return x.obj.walSeq == walSeqMerged && !x.obj.wal && x.Size < e.mergeSmall()
}

// mergeFlushed merges the flush extents of parts (those this broker
// leads), taking the flush objects in the order they were written, as many
// as about 4 x PackedObjectBytes of inputs at a time: each is read once,
// and every partition's extents in them (a prefix of its flush extents,
// one group commit after another) become one extent of a merged object.
// A flush object holds every partition its group commit touched, so
// merging partition by partition read each of them once per batch of
// partitions; this reads it once, and writes about one merged object per
// 16 MiB of inputs (or MaxPartitionsPerObject partitions), whatever the
// partition count. Every flush extent is merged, however few a partition
// has, so flush objects die within a roll or two.
func (e *Engine) mergeFlushed(ctx context.Context, parts []*Partition) error {
	type pending struct {
		p       *Partition
		loadSeq uint64
		exts    []*extent // flush extents not merged yet, in offset order
	}
	var all []*pending
	inputs := map[*object]int64{} // bytes of led partitions' flush extents
	for _, p := range parts {
		p.mu.RLock()
		if p.led && !p.deleted {
			var xs []*extent
			for _, x := range p.extents {
				if x.obj.walSeq == walSeqFlush && !x.obj.wal {
					xs = append(xs, x)
					inputs[x.obj] += x.Size
				}
			}
			if len(xs) > 0 {
				all = append(all, &pending{p: p, loadSeq: p.loadSeq, exts: xs})
			}
		}
		p.mu.RUnlock()
	}
	objs := make([]*object, 0, len(inputs))
	for o := range inputs {
		objs = append(objs, o)
	}
	slices.SortFunc(objs, func(a, b *object) int { return cmp.Compare(a.gen, b.gen) })
	limit := 4 * e.cfg.PackedObjectBytes
	for len(objs) > 0 {
		chosen := map[*object]bool{}
		var size int64
		for len(objs) > 0 && (len(chosen) == 0 || size+inputs[objs[0]] <= limit) {
			chosen[objs[0]] = true
			size += inputs[objs[0]]
			objs = objs[1:]
		}
		var runs []*mergeRun
		for _, pd := range all {
			n := 0
			var bytes int64
			for n < len(pd.exts) && chosen[pd.exts[n].obj] && (n == 0 || pd.exts[n].Base == pd.exts[n-1].Last+1) {
				bytes += pd.exts[n].Size
				n++
			}
			if n == 0 {
				continue
			}
			runs = append(runs, &mergeRun{p: pd.p, loadSeq: pd.loadSeq, exts: pd.exts[:n], size: bytes})
			pd.exts = pd.exts[n:]
		}
		if len(runs) == 0 {
			continue
		}
		data, err := e.mergeData(ctx, runs)
		if err != nil {
			return err
		}
		sortRuns(runs)
		for len(runs) > 0 {
			n, size := 0, int64(0)
			for n < len(runs) && n < e.cfg.Shared.MaxPartitionsPerObject && (n == 0 || size+runs[n].size <= limit) {
				size += runs[n].size
				n++
			}
			if err := e.mergeObject(ctx, runs[:n], data); err != nil {
				return err
			}
			runs = runs[n:]
		}
	}
	return nil
}

// sortRuns orders runs by topic id and partition, as objects hold them.
func sortRuns(runs []*mergeRun) {
	slices.SortFunc(runs, func(a, b *mergeRun) int {
		if c := bytes.Compare(a.p.t.id[:], b.p.t.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.p.id, b.p.id)
	})
}

// mergeSmall is the size under which a merged extent is merged again.
func (e *Engine) mergeSmall() int64 { return e.cfg.PackedObjectBytes / 4 }

// sharedMergeGap is the most bytes between two input extents of one S3 object that
// are read (and thrown away) to read both in one request.
const sharedMergeGap = 256 << 10

// mergeReads is how many input reads of one merge run at once.
const mergeReads = 8

// mergeData reads every extent of runs, a request per object (or per
// stretch of it whose extents are within sharedMergeGap of each other).
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
			if x.Pos-cur.end <= sharedMergeGap {
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
