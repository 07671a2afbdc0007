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

// compact cleans a cleanup.policy=compact partition: over the rolled
// extents old enough for min.compaction.lag.ms, it keeps the latest record
// per key, drops tombstones older than delete.retention.ms, and writes the
// survivors (same offsets; batches keep their base and last offsets) into
// one new object whose extent covers the whole cleaned range. Registering
// that object is the atomic swap: at Open, an extent wholly inside a newer
// object's extent is superseded. The in-memory tail (unrolled data) is never
// compacted.
//
// It runs when the not-yet-compacted share of the rolled bytes reaches
// min.cleanable.dirty.ratio, and says whether it did (due). Each run
// rewrites the whole cleaned range, which is simple and right for the
// small, hot-keyed topics compaction serves (offsets, changelogs); huge
// compacted partitions would want incremental cleaning. pc (nil: none)
// paces its reads, writes and decoding.
func (p *Partition) compact(ctx context.Context, pc *pacer) (due bool, err error) {
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
	var dirty, total int64
	for _, x := range exts {
		total += x.Size
		if x.obj.walSeq != 0 {
			dirty += x.Size
		}
	}
	if len(exts) == 0 || dirty == 0 || (total > 0 && float64(dirty)/float64(total) < cfg.MinCleanableRatio) {
		return false, nil
	}

	datas := make([][]byte, len(exts))
	for i, x := range exts {
		d, err := e.extentData(ctx, x)
		if err != nil {
			return true, err
		}
		datas[i] = d
		if !pc.pace(int64(len(d))) {
			return true, ctx.Err()
		}
	}
	// A batch that does not decode within the decompression limits
	// (stored before produce checked compressed batches: corrupt, or a
	// bomb) is kept whole and its keys are left out: the pass goes on
	// rather than failing on it every time. Such a batch may keep an old
	// value of a key alive; it never hides the latest.
	limit := p.decompressedLimit()
	skipped := 0
	decode := func(bt []byte) (*batch.Decoded, error) {
		x, err := e.dec.Records(ctx, bt, limit)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			skipped++
			if skipped == 1 {
				e.log.Warn("compaction: keeping a batch that does not decode", "topic", p.t.name,
					"partition", p.id, "base_offset", batch.BaseOffset(bt), "err", err)
			}
			return nil, nil
		}
		return x, nil
	}
	// Pass 1: the latest offset of every key.
	latest := map[string]int64{}
	// Records of aborted transactions never become a key's latest value,
	// and are dropped (as Kafka's cleaner does); markers are kept.
	abortedBatch := func(bt []byte) bool {
		return batch.Attributes(bt)&batch.AttrTransactional != 0 && isAborted(aborted, batch.ProducerID(bt), batch.BaseOffset(bt))
	}
	err = eachBatch(pc, datas, func(bt []byte) error {
		if batch.Attributes(bt)&batch.AttrControl != 0 || abortedBatch(bt) {
			return nil
		}
		x, err := decode(bt)
		if x == nil {
			return err
		}
		defer x.Release()
		h, recs := &x.Header, x.Records
		for i := range recs {
			if off := h.BaseOffset + int64(recs[i].OffsetDelta); off >= ls && recs[i].Key != nil {
				latest[string(recs[i].Key)] = off
			}
		}
		return nil
	})
	if err != nil {
		return true, err
	}
	// Pass 2: rewrite.
	horizon := now - cfg.DeleteRetentionMs
	b := segment.NewBuilder(0)
	b.StartExtent(p.t.id, p.id, exts[0].Base)
	var kept []kmsg.Record
	err = eachBatch(pc, datas, func(bt []byte) error {
		if batch.LastOffset(bt) < ls {
			return nil
		}
		if batch.Attributes(bt)&batch.AttrControl != 0 {
			b.AddBatch(bt)
			return nil
		}
		if abortedBatch(bt) {
			return nil
		}
		x, err := decode(bt)
		if x == nil {
			if err == nil {
				b.AddBatch(bt) // undecodable: kept whole
			}
			return err
		}
		defer x.Release()
		h, recs := x.Header, x.Records
		kept = kept[:0]
		for i := range recs {
			r := &recs[i]
			off := h.BaseOffset + int64(r.OffsetDelta)
			if r.Key == nil || off < ls || latest[string(r.Key)] != off {
				continue
			}
			if r.Value == nil && batch.RecordTimestamp(&h, r) < horizon {
				continue // tombstone past its grace time
			}
			kept = append(kept, *r)
		}
		switch len(kept) {
		case len(recs):
			b.AddBatch(bt)
		case 0:
		default:
			nb, err := batch.Rebuild(h, kept)
			if err != nil {
				return err
			}
			b.AddBatch(nb)
		}
		return nil
	})
	if err != nil {
		return true, err
	}
	b.EndExtent(exts[len(exts)-1].Last)
	body, segExts := b.Finish()
	if !pc.pace(int64(len(body))) { // the write to come
		return true, ctx.Err()
	}
	cmps, err := e.fenceCompares(p)
	if err != nil {
		return true, err
	}
	key, gen, err := e.replacementKey(ctx)
	if err != nil {
		return true, err
	}
	if err := e.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return true, fmt.Errorf("put %s: %w", key, err)
	}
	e.m.objectBytes.Add(float64(len(body)))
	rec := objectRecord{Gen: gen, WALSeq: 0, Size: int64(len(body)), Extents: segExts}
	if !e.shared() && !e.beginRewrite(p, exts) {
		_ = e.store.Delete(ctx, key) // a merge replaced some of the inputs; the next pass cleans again
		return true, nil
	}
	defer e.endRewrite()
	if err := e.md.Txn(ctx, cmps, meta.Put(keyObjects+key, encodeObject(&rec))); err != nil {
		_ = e.store.Delete(ctx, key)
		return true, fmt.Errorf("register compacted object: %w", err)
	}
	var o *object
	if e.shared() {
		o = e.sharedObject(key, &rec)
	} else {
		o = &object{key: key, gen: gen, size: rec.Size}
		e.addObject(o, 1)
	}
	nx := &extent{Extent: segExts[0], obj: o}

	p.mu.Lock()
	if p.deleted || nx.Last < p.logStart.Load() {
		p.mu.Unlock()
		e.releaseExtents([]*extent{nx})
		return true, nil
	}
	var keep, dead []*extent
	for _, x := range p.extents {
		if x.obj.gen < gen && x.Base >= nx.Base && x.Last <= nx.Last {
			dead = append(dead, x)
		} else {
			keep = append(keep, x)
		}
	}
	keep = append(keep, nx)
	sortExtents(keep)
	p.extents = keep
	// Cached rolled batches in the tail hold the uncompacted data; readers
	// should see the cleaned log, so drop them.
	k, freed := 0, int64(0)
	for k < len(p.tail) && p.tail[k].rolled && p.tail[k].last <= nx.Last {
		if p.tail[k].owned {
			freed += int64(len(p.tail[k].data))
		}
		k++
	}
	p.dropTail(k)
	p.mu.Unlock()
	e.tailBytes.Add(-freed)
	e.releaseExtents(dead)
	e.m.compactions.Inc()
	e.log.Debug("compacted partition", "topic", p.t.name, "partition", p.id,
		"before_bytes", total, "after_bytes", nx.Size, "keys", len(latest))
	return true, nil
}

// eachBatch walks the batches of several extents' bytes in order, paced
// by pc (nil: not paced).
func eachBatch(pc *pacer, datas [][]byte, fn func([]byte) error) error {
	for _, d := range datas {
		for len(d) > 0 {
			if !pc.pace(0) {
				return pc.ctx.Err()
			}
			n, err := batch.Size(d)
			if err != nil || n > len(d) {
				return fmt.Errorf("%w: bad batch framing in object", ErrCorruptMessage)
			}
			if err := fn(d[:n]); err != nil {
				return err
			}
			d = d[n:]
		}
	}
	return nil
}
