package log

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
)

// The background roll of cluster mode. Every flush is an object of its own,
// so a partition's data is spread over many small extents. Its leader
// periodically merges runs of them (and of small merged extents:
// sharedmerge.go) into packed objects (many partitions per object, up to
// MaxPartitionsPerObject and 4 x PackedObjectBytes, as the single-node roll
// packs a WAL segment): the objects one roll writes follow the bytes it
// merges, not the partition count. The merged object is
// registered with a gen above every gen handed out so far, which supersedes
// the inputs; the controller's GC then deletes flush objects left with no
// live extent. Compacted topics are left to compaction, which rewrites them
// anyway.

// Object record WALSeq values in cluster mode: anything but 0 means "not
// compacted" to the cleaner.
const (
	walSeqFlush  = 1 // one flush
	walSeqMerged = 2 // flush extents merged by the roll
)

// minMergeExtents is the fewest small merged extents of a partition worth
// merging again.
const minMergeExtents = 4

// mergeRun is one partition's run of flush extents to merge.
type mergeRun struct {
	p       *Partition
	epoch   int32 // of the leadership the merge is registered under
	loadSeq uint64
	exts    []*extent
	size    int64
}

// rollLoopShared merges flush extents every RollInterval.
func (e *Engine) rollLoopShared() {
	defer e.bg.Done()
	t := time.NewTicker(e.cfg.RollInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-e.ctx.Done():
			return
		}
		if err := e.mergeShared(e.ctx); err != nil && e.ctx.Err() == nil {
			e.log.Warn("merging flush objects failed; next roll retries", "err", err)
		}
	}
}

// mergeShared merges the flush extents of every partition this broker
// leads, an object's worth of inputs at a time (mergeFlushed), then the
// runs of small merged extents (mergeSmallRuns).
func (e *Engine) mergeShared(ctx context.Context) error {
	var parts []*Partition
	e.mu.RLock()
	topics := make([]*topic, 0, len(e.topics))
	for _, t := range e.topics {
		topics = append(topics, t)
	}
	e.mu.RUnlock()
	for _, t := range topics {
		if t.cfg.Load().Compact {
			continue
		}
		parts = append(parts, t.partitions()...)
	}
	if err := e.mergeFlushed(ctx, parts); err != nil {
		return err
	}
	var runs []*mergeRun
	for _, p := range parts {
		if r := p.mergeCandidates(); r != nil {
			runs = append(runs, r)
		}
	}
	// Partitions next to each other were merged into the same objects
	// before: reading them together reads a few objects.
	sortRuns(runs)
	limit := 4 * e.cfg.PackedObjectBytes
	for len(runs) > 0 {
		n, size := 0, int64(0)
		for n < len(runs) && n < e.cfg.Shared.MaxPartitionsPerObject && (n == 0 || size+runs[n].size <= limit) {
			size += runs[n].size
			n++
		}
		if err := e.mergeObject(ctx, runs[:n], nil); err != nil {
			return err
		}
		runs = runs[n:]
	}
	return nil
}

// mergeCandidates returns the partition's first run of consecutive small
// merged extents (sharedmerge.go), if it is long enough, bounded to
// PackedObjectBytes. Flush extents are mergeFlushed's.
func (p *Partition) mergeCandidates() *mergeRun {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.led || p.deleted {
		return nil
	}
	var run []*extent
	var size int64
	for _, x := range p.extents {
		mergeable := p.e.mergeable(x)
		if !mergeable || (len(run) > 0 && x.Base != run[len(run)-1].Last+1) {
			if len(run) >= minMergeExtents {
				break
			}
			run, size = nil, 0
			if !mergeable {
				continue
			}
		}
		if size+x.Size > p.e.cfg.PackedObjectBytes && len(run) > 0 {
			break
		}
		run = append(run, x)
		size += x.Size
	}
	if len(run) < minMergeExtents {
		return nil
	}
	return &mergeRun{p: p, loadSeq: p.loadSeq, exts: run, size: size}
}

// mergeObject writes runs into one object and swaps it in. Runs whose
// leadership is moving are left for the next roll, and so are those past
// the compares one Txn can hold. data holds the runs' input extents when
// the caller read them already (nil: read them here).
func (e *Engine) mergeObject(ctx context.Context, runs []*mergeRun, data map[*extent][]byte) error {
	var set compareSet
	keep := runs[:0:0]
	for _, r := range runs {
		c, ep, ok := e.cfg.Shared.Fence(r.p.t.name, r.p.id)
		if !ok || ep != r.p.LeaderEpoch() {
			continue
		}
		if !set.add(c) {
			break
		}
		r.epoch = ep
		keep = append(keep, r)
	}
	runs = keep
	if len(runs) == 0 {
		return nil
	}
	if data == nil {
		var err error
		if data, err = e.mergeData(ctx, runs); err != nil {
			return err
		}
	}
	b := segment.NewBuilder(0)
	for _, r := range runs {
		b.StartExtent(r.p.t.id, r.p.id, r.exts[0].Base)
		for _, x := range r.exts {
			d := data[x]
			for len(d) > 0 {
				n, err := batch.Size(d)
				if err != nil || n > len(d) {
					return fmt.Errorf("%w: merging %s-%d: bad batch in %s", ErrStorage, r.p.t.name, r.p.id, x.obj.key)
				}
				b.AddBatch(d[:n])
				d = d[n:]
			}
		}
		b.EndExtent(r.exts[len(r.exts)-1].Last)
	}
	body, exts := b.Finish()
	key, gen, err := e.replacementKey(ctx)
	if err != nil {
		return err
	}
	if err := e.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	e.m.objectBytes.Add(float64(len(body)))
	rec := objectRecord{Gen: gen, WALSeq: walSeqMerged, Size: int64(len(body)), Extents: exts}
	if err := e.registerMerged(ctx, runs, set.list, meta.Put(keyObjects+key, encodeObject(&rec))); err != nil {
		_ = e.store.Delete(ctx, key)
		if isConflict(err) {
			return nil // a partition moved meanwhile; nothing was swapped
		}
		return fmt.Errorf("register merged object: %w", err)
	}
	o := e.sharedObject(key, &rec)
	e.cache.fill(o, body) // it replaces extents readers may be reading now
	for j, r := range runs {
		nx := &extent{Extent: exts[j], obj: o}
		r.p.mu.Lock()
		if r.p.loadSeq == r.loadSeq {
			keep := []*extent{nx}
			for _, x := range r.p.extents {
				if !(x.obj.gen < gen && x.Base >= nx.Base && x.Last <= nx.Last) {
					keep = append(keep, x)
				}
			}
			sortExtents(keep)
			r.p.extents = keep
		}
		r.p.mu.Unlock()
	}
	e.m.rolls.Inc()
	return nil
}

// registerMerged registers a merged object under the fences of its runs,
// again under the fence's new version while every run is still led at its
// epoch (the fence moved under them: RefreshFence).
func (e *Engine) registerMerged(ctx context.Context, runs []*mergeRun, cmps []meta.Compare, put meta.Op) error {
	for attempt := 0; ; attempt++ {
		err := e.md.Txn(ctx, cmps, put)
		if !isConflict(err) || attempt == maxFenceRetries || !e.fenceMoved(ctx, err) {
			return err
		}
		var set compareSet
		for _, r := range runs {
			c, ok := e.fenceOf(r.p, r.epoch)
			if !ok || !set.add(c) {
				return err
			}
		}
		if sameCompares(set.list, cmps) {
			return err
		}
		cmps = set.list
	}
}

// replacementKey is nextObjectKey for an object that supersedes others
// (compaction, merges). In cluster mode its gen comes from a fresh
// allocation, so it is above every gen any broker was handed before, even
// one still using an older block.
func (e *Engine) replacementKey(ctx context.Context) (string, uint64, error) {
	if !e.shared() {
		return e.nextObjectKey(ctx)
	}
	start, err := allocBlock(ctx, e.md, keySeqObject, 1)
	if err != nil {
		return "", 0, err
	}
	gen := uint64(start) + 1 // as nextObjectKey: a block's first gen is start+1
	return fmt.Sprintf("%s%016x-%s", objectPrefix, gen, randHex(4)), gen, nil
}

// fenceCompares are the compares guarding a registration for p: none on a
// single node, its leadership in cluster mode.
func (e *Engine) fenceCompares(p *Partition) ([]meta.Compare, error) {
	if !e.shared() {
		return nil, nil
	}
	c, ep, ok := e.cfg.Shared.Fence(p.t.name, p.id)
	if !ok || ep != p.LeaderEpoch() {
		return nil, fmt.Errorf("%w: %s-%d", ErrNotLeader, p.t.name, p.id)
	}
	return c, nil
}
