package log

import (
	"bytes"
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
)

// compact cleans a cleanup.policy=compact partition, as Kafka's log
// cleaner does, in memory bounded whatever the partition's size: it keeps
// the latest record per key, drops tombstones older than
// delete.retention.ms and the records of aborted transactions, and keeps
// offsets (batches keep their base and last offsets). Only rolled extents
// old enough for min.compaction.lag.ms and below the last stable offset are
// cleanable; the in-memory tail (unrolled data) never is.
//
// It runs when the dirty share of the cleanable bytes (extents not yet
// written by compaction) reaches min.cleanable.dirty.ratio, and says
// whether it did (due). Each pass (compactPass) maps the keys of a prefix
// of the dirty range into a fixed-size key map (Config.CompactMapBytes),
// as many as fit, then rewrites the log from its start to the end of that
// prefix into objects of at most Config.CompactObjectBytes, reading one
// chunk at a time; it passes again while dirty data is left. pc (nil:
// none) paces its reads, writes and decoding.
func (p *Partition) compact(ctx context.Context, pc *pacer) (due bool, err error) {
	bufs := &compactBufs{}
	defer bufs.release()
	return p.compactWith(ctx, pc, bufs)
}

// compactBufs is the memory of compaction passes: the key map and the
// output object's buffer, shared by the passes over the partitions of one
// round of the clean loop (emptied, and resized if need be, each time).
type compactBufs struct {
	m   keyMap
	out []byte
	r   *scanReader
}

// release frees the key map (nil: nothing); the rest goes with bufs.
func (b *compactBufs) release() {
	if b != nil {
		b.m.release()
	}
}

// compactWith is compact with bufs.
func (p *Partition) compactWith(ctx context.Context, pc *pacer, bufs *compactBufs) (due bool, err error) {
	for {
		ran, more, err := p.compactPass(ctx, pc, bufs, nil)
		due = due || ran
		if err != nil || !more || ctx.Err() != nil {
			return due, err
		}
	}
}

// cleaning is one compaction pass.
type cleaning struct {
	p       *Partition
	pc      *pacer
	m       *keyMap
	bufs    *compactBufs
	r       *scanReader
	ls      int64 // log start
	horizon int64 // tombstones older than this go
	limit   int64 // decompressed size limit of one batch
	aborted []abortedTxn
	skipped int // batches that do not decode, kept whole
	before  int64
	after   int64
	// afterGroup, if set, is called after each registration (split: it
	// held an extent cleaned only up to the cut) and may stop the pass
	// (tests: a crash between two registrations).
	afterGroup func(split bool) bool
}

// compactPass is one pass of compact in bufs: ran says whether it
// cleaned anything, more whether dirty data is left for another pass.
func (p *Partition) compactPass(ctx context.Context, pc *pacer, bufs *compactBufs, afterGroup func(split bool) bool) (ran, more bool, err error) {
	e := p.e
	cfg := p.t.cfg.Load()
	p.mu.RLock()
	exts := append([]*extent(nil), p.extents...)
	ls := p.logStart.Load()
	// As Kafka's cleaner, nothing at or above the last stable offset is
	// cleanable: an undecided transaction's records must survive whole.
	lso := p.lsoLocked(p.hw.Load())
	aborted := append([]abortedTxn(nil), p.cr().txns.aborted...)
	p.mu.RUnlock()
	now := e.nowMs()
	n := 0
	for n < len(exts) && exts[n].Last < lso && (cfg.MinCompactionLagMs <= 0 || exts[n].MaxTS <= now-cfg.MinCompactionLagMs) {
		n++
	}
	exts = exts[:n]
	// Compaction's outputs (WAL sequence 0) are clean; they are a prefix
	// of the log, since each pass rewrites it from the start. Everything
	// from the first other extent on is dirty.
	fd := 0
	for fd < len(exts) && exts[fd].obj.walSeq == 0 {
		fd++
	}
	var dirty, total, span int64
	for i, x := range exts {
		total += x.Size
		if i >= fd {
			dirty += x.Size
			span += x.Last - x.Base + 1
		}
	}
	if dirty == 0 || (total > 0 && float64(dirty)/float64(total) < cfg.MinCleanableRatio) {
		return false, false, nil
	}
	bufs.m.reset(e.cfg.CompactMapBytes, span)
	if bufs.r == nil {
		bufs.r = newScanReader(e)
	}
	c := &cleaning{p: p, pc: pc, ls: ls, horizon: now - cfg.DeleteRetentionMs, limit: p.decompressedLimit(),
		aborted: aborted, m: &bufs.m, bufs: bufs, r: bufs.r, afterGroup: afterGroup}

	k, cut, err := c.mapDirty(ctx, exts[fd:])
	if err != nil {
		return true, false, err
	}
	end := fd + k // exts[:end] are cleaned whole
	if cut >= 0 {
		end++ // and exts[end-1] up to cut
	}
	more = end < len(exts) || cut >= 0
	for i := 0; i < end; {
		j, size := i+1, exts[i].Size
		for j < end && size+exts[j].Size <= e.cfg.CompactObjectBytes {
			size += exts[j].Size
			j++
		}
		gcut := int64(-1)
		if j == end {
			gcut = cut
		}
		ok, err := c.rewrite(ctx, exts[i:j], j > fd, gcut)
		if err != nil || !ok {
			return true, false, err
		}
		i = j
	}
	e.m.compactions.Inc()
	e.log.Debug("compacted partition", "topic", p.t.name, "partition", p.id,
		"before_bytes", c.before, "after_bytes", c.after, "keys", c.m.len(), "map_bytes", c.m.bytes(), "more", more)
	return true, more, nil
}

// abortedBatch says whether bt belongs to an aborted transaction: its
// records never become a key's latest value and are dropped (as Kafka's
// cleaner does); markers are kept.
func (c *cleaning) abortedBatch(bt []byte) bool {
	return batch.Attributes(bt)&batch.AttrTransactional != 0 && isAborted(c.aborted, batch.ProducerID(bt), batch.BaseOffset(bt))
}

// decode decodes bt's records; nil without an error for a batch that does
// not decode within the decompression limits (stored before produce
// checked compressed batches: corrupt, or a bomb). Such a batch is kept
// whole and its keys are left out: the pass goes on rather than failing
// on it every time. It may keep an old value of a key alive; it never
// hides the latest.
func (c *cleaning) decode(ctx context.Context, bt []byte) (*batch.Decoded, error) {
	e := c.p.e
	x, err := e.dec.Records(ctx, bt, c.limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.skipped++
		if c.skipped == 1 {
			e.log.Warn("compaction: keeping a batch that does not decode", "topic", c.p.t.name,
				"partition", c.p.id, "base_offset", batch.BaseOffset(bt), "err", err)
		}
		return nil, nil
	}
	return x, nil
}

// mapDirty puts the keys of the dirty extents into the map, in offset
// order, a whole batch at a time, until one does not fit. It returns how
// many extents are mapped whole (k); if the map filled inside the first
// one, cut is the last offset of its mapped batches (-1 otherwise). When
// it fills inside a later extent the pass ends before that one: the keys
// already taken from it only drop older records, whose newer ones that
// extent keeps.
func (c *cleaning) mapDirty(ctx context.Context, dirty []*extent) (k int, cut int64, err error) {
	for i, x := range dirty {
		full, last := false, int64(-1)
		err := c.r.batches(ctx, c.pc, x, func(bt []byte) error {
			if batch.LastOffset(bt) >= c.ls && batch.Attributes(bt)&batch.AttrControl == 0 && !c.abortedBatch(bt) {
				d, err := c.decode(ctx, bt)
				if err != nil {
					return err
				}
				if d != nil {
					defer d.Release()
					h, recs := &d.Header, d.Records
					if !c.m.fits(len(recs)) {
						if c.m.len() > 0 {
							full = true
							return errStopBatches
						}
						// One batch holds more records than the map: it
						// gets a map of its own size, bounded as its
						// decoding is by the decompression limit.
						c.m = newKeyMap(int64(float64(len(recs))/keyMapLoad+2)*keySlotBytes, int64(len(recs)))
					}
					for i := range recs {
						if off := h.BaseOffset + int64(recs[i].OffsetDelta); off >= c.ls && recs[i].Key != nil {
							c.m.put(recs[i].Key, off)
						}
					}
				}
			}
			last = batch.LastOffset(bt)
			return nil
		})
		if err != nil {
			return 0, -1, err
		}
		if !full {
			continue
		}
		if i > 0 {
			return i, -1, nil
		}
		if last < 0 {
			return 0, -1, fmt.Errorf("compaction: no batch of %s fits the key map", x.obj.key) // cannot happen: the first always does
		}
		return 0, last, nil
	}
	return len(dirty), -1, nil
}

// filter returns what is left of bt after cleaning (nil: nothing), and
// whether that differs from bt. A record survives if it has a key, is at
// or above the log start, is the latest of its key as far as the map knows
// (the map holds every key of the dirty range cleaned; a key not in it was
// last written in the clean part, already cleaned), and is not a tombstone
// past the horizon.
func (c *cleaning) filter(ctx context.Context, bt []byte, kept *[]kmsg.Record) ([]byte, bool, error) {
	if batch.LastOffset(bt) < c.ls {
		return nil, true, nil
	}
	if batch.Attributes(bt)&batch.AttrControl != 0 {
		return bt, false, nil
	}
	if c.abortedBatch(bt) {
		return nil, true, nil
	}
	d, err := c.decode(ctx, bt)
	if d == nil {
		return bt, false, err // undecodable: kept whole
	}
	defer d.Release()
	h, recs := d.Header, d.Records
	*kept = (*kept)[:0]
	for i := range recs {
		r := &recs[i]
		off := h.BaseOffset + int64(r.OffsetDelta)
		if r.Key == nil || off < c.ls {
			continue
		}
		if latest, ok := c.m.get(r.Key); ok && latest > off {
			continue
		}
		if r.Value == nil && batch.RecordTimestamp(&h, r) < c.horizon {
			continue // tombstone past its grace time
		}
		*kept = append(*kept, *r)
	}
	switch len(*kept) {
	case len(recs):
		return bt, false, nil
	case 0:
		return nil, true, nil
	}
	nb, err := batch.Rebuild(h, *kept)
	return nb, true, err
}

// output is one object a group's rewrite registers.
type output struct {
	key  string
	gen  uint64
	body []byte
	rec  objectRecord
}

// rewrite cleans the group g of adjacent extents into one new object whose
// extent covers exactly theirs, and registers it, replacing them (the
// atomic swap: at Open an extent that newer extents cover is superseded).
// If cut >= 0 the last extent of g is cleaned only up to cut: its later
// batches are copied as they are into a second object, still dirty, and
// both are registered at once. A group that holds no dirty extent and
// loses nothing is left alone. ok is false if the group's extents changed
// meanwhile (the pass ends; the next one cleans again).
func (c *cleaning) rewrite(ctx context.Context, g []*extent, dirty bool, cut int64) (ok bool, err error) {
	p, e := c.p, c.p.e
	lastX := g[len(g)-1]
	end := lastX.Last
	var in int64
	for _, x := range g {
		in += x.Size
	}
	// Output is at most its input, bar a recompressed batch: room for
	// that, so the buffer is not regrown (doubled) as it fills. The
	// buffer is the last group's, if large enough.
	b := segment.NewBuilderBuf(c.bufs.out, 0, int(in), 1)
	b.StartExtent(p.t.id, p.id, g[0].Base)
	var rest *segment.Builder // lastX past the cut
	if cut >= 0 {
		rest = segment.NewBuilder(0)
		rest.StartExtent(p.t.id, p.id, cut+1)
	}
	changed := false
	var kept []kmsg.Record
	for _, x := range g {
		err := c.r.batches(ctx, c.pc, x, func(bt []byte) error {
			if rest != nil && x == lastX && batch.BaseOffset(bt) > cut {
				rest.AddBatch(bt)
				return nil
			}
			nb, ch, err := c.filter(ctx, bt, &kept)
			changed = changed || ch
			if nb != nil {
				b.AddBatch(nb)
			}
			return err
		})
		if err != nil {
			return false, err
		}
	}
	c.before += in
	if !changed && !dirty {
		c.after += in
		return true, nil
	}
	outs := make([]output, 0, 2)
	if rest != nil {
		b.EndExtent(cut)
		rest.EndExtent(end)
	} else {
		b.EndExtent(end)
	}
	body, exts := b.Finish()
	defer func() { c.bufs.out = body[:0] }() // Put is done with it by then
	outs = append(outs, output{body: body, rec: objectRecord{WALSeq: 0, Size: int64(len(body)), Extents: exts}})
	if rest != nil {
		body, exts := rest.Finish()
		// Still dirty: it keeps its WAL sequence number.
		outs = append(outs, output{body: body, rec: objectRecord{WALSeq: lastX.obj.walSeq, Size: int64(len(body)), Extents: exts}})
	}
	cmps, err := e.fenceCompares(p)
	if err != nil {
		return false, err
	}
	ops := make([]meta.Op, 0, len(outs))
	deleteAll := func(n int) {
		for i := range n {
			_ = e.store.Delete(ctx, outs[i].key)
		}
	}
	for i := range outs {
		o := &outs[i]
		if !c.pc.pace(int64(len(o.body))) { // the write to come
			deleteAll(i)
			return false, ctx.Err()
		}
		if o.key, o.gen, err = e.replacementKey(ctx); err != nil {
			deleteAll(i)
			return false, err
		}
		if err := e.store.Put(ctx, o.key, bytes.NewReader(o.body), int64(len(o.body))); err != nil {
			deleteAll(i + 1)
			return false, fmt.Errorf("put %s: %w", o.key, err)
		}
		e.m.objectBytes.Add(float64(len(o.body)))
		c.after += int64(len(o.body))
		o.rec.Gen = o.gen
		o.body = nil
		ops = append(ops, meta.Put(keyObjects+o.key, encodeObject(&o.rec)))
	}
	if !e.shared() && !e.beginRewrite(p, g) {
		deleteAll(len(outs)) // a merge replaced some of the inputs; the next pass cleans again
		return false, nil
	}
	defer e.endRewrite()
	if err := e.md.Txn(ctx, cmps, ops...); err != nil {
		deleteAll(len(outs))
		return false, fmt.Errorf("register compacted object: %w", err)
	}
	nxs := make([]*extent, len(outs))
	for i := range outs {
		var o *object
		if e.shared() {
			o = e.sharedObject(outs[i].key, &outs[i].rec)
		} else {
			o = &object{key: outs[i].key, gen: outs[i].gen, walSeq: outs[i].rec.WALSeq, size: outs[i].rec.Size}
			e.addObject(o, 1)
		}
		nxs[i] = &extent{Extent: outs[i].rec.Extents[0], obj: o}
	}
	gen := outs[0].gen // the older output's: every input is older still

	p.mu.Lock()
	if p.deleted || end < p.logStart.Load() {
		p.mu.Unlock()
		e.releaseExtents(nxs)
		return false, nil
	}
	var keep, dead []*extent
	for _, x := range p.extents {
		if x.obj.gen < gen && x.Base >= g[0].Base && x.Last <= end {
			dead = append(dead, x)
		} else {
			keep = append(keep, x)
		}
	}
	keep = append(keep, nxs...)
	sortExtents(keep)
	p.extents = keep
	// Cached rolled batches in the tail hold the uncompacted data; readers
	// should see the cleaned log, so drop them.
	k, freed := 0, int64(0)
	for k < len(p.tail) && p.tail[k].rolled && p.tail[k].last <= end {
		if p.tail[k].owned {
			freed += int64(len(p.tail[k].data))
		}
		k++
	}
	p.dropTail(k)
	p.mu.Unlock()
	e.tailBytes.Add(-freed)
	e.releaseExtents(dead)
	if c.afterGroup != nil && !c.afterGroup(rest != nil) {
		return false, nil
	}
	return true, nil
}
