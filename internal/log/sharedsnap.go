package log

// Producer snapshots in cluster mode: what a registered flush folds into a
// partition's rolled producer state, and when and how that state is
// written to the metadata store so a take-over replays only its tail.

import (
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/meta"
)

// foldRolledShared folds a registered batch into p's snapshot state. Every
// batch, with a producer or not, moves the state's upTo, so a take-over
// replays only what was registered after the snapshot. snapMu held.
func (e *Engine) foldRolledShared(p *Partition, bt []byte) {
	e.foldRolled(p, bt)
	c := p.c()
	if last := batch.LastOffset(bt) + 1; last > c.rolledUpTo {
		c.rolledUpTo = last
	}
	c.unsnapBytes += int64(len(bt))
}

// snapshotExtents bounds the flush extents registered between two
// snapshots of a partition: a take-over reads each of them (one GET each),
// and a partition written a record at a time registers one per flush, so
// bytes alone would let hundreds pile up.
const snapshotExtents = 64

// snapshotOverdue: p has SnapshotBytes or snapshotExtents registered since
// its last snapshot, which the snapshot loop then writes at once. snapMu
// held.
func (e *Engine) snapshotOverdue(p *Partition) bool {
	c := p.cr()
	return c.unsnapBytes >= e.cfg.Shared.SnapshotBytes || c.unsnapExtents >= snapshotExtents
}

// snapshotRequest writes p's producer snapshot now (hand-off).
func (e *Engine) snapshotRequest(p *Partition) {
	e.snapWriteMu.Lock()
	defer e.snapWriteMu.Unlock()
	e.snapMu.Lock()
	if c := p.cr(); c.unsnapBytes > 0 || c.unsnapExtents > 0 {
		// Whatever was registered since: the next leader replays nothing.
		if e.prodDirty == nil {
			e.prodDirty = map[*Partition]struct{}{}
		}
		e.prodDirty[p] = struct{}{}
	}
	s, ok := e.encodeSnapshotLocked(p)
	e.snapMu.Unlock()
	if ok {
		e.writeSnapshots([]prodSnap{s})
	}
}

// snapshotLoop writes the producer snapshots of dirty partitions every
// SnapshotInterval, off the flush path: a flush never waits for them.
func (e *Engine) snapshotLoop() {
	defer e.bg.Done()
	t := time.NewTicker(e.cfg.Shared.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.snapshotDirty(false)
		case <-e.snapKick:
			e.snapshotDirty(true)
		case <-e.ctx.Done():
			return
		}
	}
}

// prodSnap is one partition's encoded producer snapshot with the compares
// that guard writing it.
type prodSnap struct {
	p    *Partition
	cmps []meta.Compare
	val  []byte
}

// snapshotTxnBytes bounds the snapshot values written in one Txn, well
// under etcd's default request limit (1.5 MiB).
const snapshotTxnBytes = 512 << 10

// snapshotDirty writes the snapshot of every partition whose registered
// producer state changed since its last one, many partitions per Txn. The
// state is encoded under snapMu and written after it is released, so
// registrations (which fold into that state) never wait for etcd here.
//
// With bigOnly (a kick from a registration) only partitions past
// SnapshotBytes are written; the others wait for the interval.
func (e *Engine) snapshotDirty(bigOnly bool) {
	e.snapWriteMu.Lock()
	defer e.snapWriteMu.Unlock()
	e.snapMu.Lock()
	var snaps []prodSnap
	for p := range e.prodDirty {
		if bigOnly && !e.snapshotOverdue(p) {
			continue
		}
		if s, ok := e.encodeSnapshotLocked(p); ok {
			snaps = append(snaps, s)
		}
	}
	e.snapMu.Unlock()
	for len(snaps) > 0 {
		n, ncmp, size := 0, 0, 0
		for n < len(snaps) && (n == 0 || (ncmp+len(snaps[n].cmps) <= meta.MaxTxnOps && n < meta.MaxTxnOps &&
			size+len(snaps[n].val) <= snapshotTxnBytes)) {
			ncmp += len(snaps[n].cmps)
			size += len(snaps[n].val)
			n++
		}
		e.writeSnapshots(snaps[:n])
		snaps = snaps[n:]
	}
}

// encodeSnapshotLocked takes p off the dirty set and encodes its rolled
// producer state; false when p is not dirty or no longer led. snapMu held.
func (e *Engine) encodeSnapshotLocked(p *Partition) (prodSnap, bool) {
	if _, dirty := e.prodDirty[p]; !dirty {
		return prodSnap{}, false
	}
	delete(e.prodDirty, p)
	c := p.c()
	c.unsnapBytes, c.unsnapExtents = 0, 0
	cmps, _, ok := e.cfg.Shared.Fence(p.t.name, p.id)
	if !ok {
		return prodSnap{}, false
	}
	c.rolledProducers.expire(e.producerCutoff())
	c.rolledTxns.truncate(p.logStart.Load())
	return prodSnap{p: p, cmps: cmps, val: encodeProducers(c.rolledUpTo, &c.rolledProducers, &c.rolledTxns)}, true
}

// writeSnapshots writes snaps in one Txn under all their compares. When a
// compare fails (one partition moved), each is written on its own so the
// others still land. Other failures mark them dirty for the next pass.
// snapWriteMu held, so snapshots of a partition land in the order encoded.
func (e *Engine) writeSnapshots(snaps []prodSnap) {
	var cmps []meta.Compare
	ops := make([]meta.Op, 0, len(snaps))
	for _, s := range snaps {
		cmps = append(cmps, s.cmps...)
		ops = append(ops, meta.Put(producersKey(s.p.t.id, s.p.id), s.val))
	}
	err := e.md.Txn(e.ctx, cmps, ops...)
	switch {
	case err == nil:
	case isConflict(err) && len(snaps) > 1:
		for i := range snaps {
			e.writeSnapshots(snaps[i : i+1])
		}
	case isConflict(err):
		// Leadership gone: the next leader rebuilds from what is registered.
	default:
		e.log.Warn("producer snapshot failed; next pass retries", "partitions", len(snaps), "err", err)
		e.snapMu.Lock()
		for _, s := range snaps {
			e.prodDirty[s.p] = struct{}{}
		}
		e.snapMu.Unlock()
	}
}
