package log

// Producer snapshots in cluster mode: what a registered flush folds into a
// partition's rolled producer state, and when and how that state is
// written to the metadata store so a take-over replays only its tail.

import (
	"cmp"
	"slices"
	"sync"
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

// snapshotRequest writes p's producer snapshot now (hand-off) and returns
// once it is written (or failed). Hand-offs that run at once (a joining
// broker takes thousands of partitions) share Txns.
//
// While the broker stops (Engine.Stopping) only a snapshot that is overdue
// is written: the others are left to the next leader, which replays what
// was registered since (at most snapshotExtents extents or SnapshotBytes
// per partition, the bound a take-over after a crash has anyway). A stop
// then costs the flush of what is unflushed, not a snapshot key per
// partition: 50,000 of them, 128 to a Txn, took 6-8 s of a loaded etcd.
func (e *Engine) snapshotRequest(p *Partition) {
	e.snapMu.Lock()
	if e.stopping.Load() && !e.snapshotOverdue(p) {
		e.snapMu.Unlock()
		return
	}
	if c := p.cr(); c.unsnapBytes > 0 || c.unsnapExtents > 0 {
		// Whatever was registered since: the next leader replays nothing.
		if e.prodDirty == nil {
			e.prodDirty = map[*Partition]struct{}{}
		}
		e.prodDirty[p] = struct{}{}
	}
	s, ok := e.encodeSnapshotLocked(p)
	e.snapMu.Unlock()
	if !ok {
		return
	}
	done := make(chan struct{})
	q := &e.snapQueue
	q.mu.Lock()
	q.reqs = append(q.reqs, snapReq{s: s, done: done})
	if !q.running {
		q.running = true
		go e.writeRequestedSnapshots()
	}
	q.mu.Unlock()
	<-done
}

// Stopping tells the engine that the broker is stopping: the hand-offs
// that follow write only overdue producer snapshots (snapshotRequest).
func (e *Engine) Stopping() { e.stopping.Store(true) }

// snapQueue is the hand-off snapshots waiting to be written.
type snapQueue struct {
	mu      sync.Mutex
	reqs    []snapReq
	running bool // writeRequestedSnapshots is running
}

type snapReq struct {
	s    prodSnap
	done chan struct{}
}

// writeRequestedSnapshots writes the queued hand-off snapshots, as many
// per Txn as fit, until the queue is empty. It holds snapWriteMu while it
// writes, so they land after any snapshot of the same partition encoded
// before them.
func (e *Engine) writeRequestedSnapshots() {
	q := &e.snapQueue
	for {
		q.mu.Lock()
		reqs := q.reqs
		q.reqs = nil
		if len(reqs) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		snaps := make([]prodSnap, len(reqs))
		for i, r := range reqs {
			snaps[i] = r.s
		}
		e.snapWriteMu.Lock()
		e.writeSnapshotBatches(snaps, handOffSnapshotTxns)
		e.snapWriteMu.Unlock()
		for _, r := range reqs {
			close(r.done)
		}
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
	p     *Partition
	epoch int32 // the leadership it was encoded under
	cmps  []meta.Compare
	val   []byte
}

// snapshotTxnBytes bounds the snapshot values written in one Txn, well
// under etcd's default request limit (1.5 MiB).
const snapshotTxnBytes = 512 << 10

// snapshotDirty writes the snapshots of partitions whose registered
// producer state changed since their last one, many partitions per Txn.
// The state is encoded under snapMu and written after it is released, so
// registrations (which fold into that state) never wait for etcd here.
//
// With bigOnly (a kick from a registration) only partitions past
// SnapshotBytes or snapshotExtents are written: as many as the data
// registered, a partition per 64 flush extents or 4 MiB at most. The
// interval pass writes at most SnapshotBudget of the others, those with
// the most registered since their last snapshot first, and leaves the
// rest for the next passes: with 100,000 partitions written at random
// every one of them is dirty at every pass, and writing them all would
// put 10,000 keys a second into etcd whatever the write rate. A
// take-over replays at most snapshotExtents extents (or SnapshotBytes)
// of a partition either way.
func (e *Engine) snapshotDirty(bigOnly bool) {
	e.snapWriteMu.Lock()
	defer e.snapWriteMu.Unlock()
	e.snapMu.Lock()
	var picked []*Partition
	var rest []*Partition
	for p := range e.prodDirty {
		if e.snapshotOverdue(p) {
			picked = append(picked, p)
		} else if !bigOnly {
			rest = append(rest, p)
		}
	}
	if budget := e.cfg.Shared.SnapshotBudget; len(rest) > budget {
		slices.SortFunc(rest, func(a, b *Partition) int {
			ca, cb := a.cr(), b.cr()
			if c := cmp.Compare(cb.unsnapExtents, ca.unsnapExtents); c != 0 {
				return c
			}
			return cmp.Compare(cb.unsnapBytes, ca.unsnapBytes)
		})
		rest = rest[:budget]
	}
	var snaps []prodSnap
	for _, p := range append(picked, rest...) {
		if s, ok := e.encodeSnapshotLocked(p); ok {
			snaps = append(snaps, s)
		}
	}
	e.snapMu.Unlock()
	e.writeSnapshotBatches(snaps, 1)
}

// writeSnapshotBatches writes snaps, as many per Txn as fit, up to
// inFlight Txns at a time when no partition has two snapshots among them
// (else one at a time, so that they land in order). snapWriteMu held.
func (e *Engine) writeSnapshotBatches(snaps []prodSnap, inFlight int) {
	var batches [][]prodSnap
	for len(snaps) > 0 {
		var set compareSet
		n, size := 0, 0
		for n < len(snaps) && n < meta.MaxTxnOps && (n == 0 || size+len(snaps[n].val) <= snapshotTxnBytes) {
			if !set.add(snaps[n].cmps) && n > 0 {
				break
			}
			size += len(snaps[n].val)
			n++
		}
		batches = append(batches, snaps[:n])
		snaps = snaps[n:]
	}
	if inFlight > 1 && len(batches) > 1 {
		seen := make(map[*Partition]struct{}, len(batches)*meta.MaxTxnOps)
	distinct:
		for _, b := range batches {
			for _, s := range b {
				if _, dup := seen[s.p]; dup {
					inFlight = 1
					break distinct
				}
				seen[s.p] = struct{}{}
			}
		}
	}
	if inFlight <= 1 || len(batches) == 1 {
		for _, b := range batches {
			e.writeSnapshots(b)
		}
		return
	}
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for _, b := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			e.writeSnapshots(b)
		})
	}
	wg.Wait()
}

// handOffSnapshotTxns is how many Txns of hand-off snapshots are written
// at once: a broker stopping hands off every partition it leads, and at
// 50,000 partitions with producer state, one Txn of 128 at a time took
// most of its 7-9 s stop.
const handOffSnapshotTxns = 16

// encodeSnapshotLocked takes p off the dirty set and encodes its rolled
// producer state; false when p is not dirty or no longer led. snapMu held.
func (e *Engine) encodeSnapshotLocked(p *Partition) (prodSnap, bool) {
	if _, dirty := e.prodDirty[p]; !dirty {
		return prodSnap{}, false
	}
	delete(e.prodDirty, p)
	c := p.c()
	c.unsnapBytes, c.unsnapExtents = 0, 0
	cmps, epoch, ok := e.cfg.Shared.Fence(p.t.name, p.id)
	if !ok {
		return prodSnap{}, false
	}
	c.rolledProducers.expire(e.producerCutoff())
	c.rolledTxns.truncate(p.logStart.Load())
	return prodSnap{p: p, epoch: epoch, cmps: cmps, val: encodeProducers(c.rolledUpTo, &c.rolledProducers, &c.rolledTxns)}, true
}

// writeSnapshots writes snaps in one Txn under all their compares. When a
// compare fails because the fence moved (RefreshFence), the snapshots of
// partitions still led at their epoch are written again under the new
// compares; when it fails otherwise, each is written on its own so the
// others still land. Other failures mark them dirty for the next pass.
// snapWriteMu held, so snapshots of a partition land in the order encoded.
func (e *Engine) writeSnapshots(snaps []prodSnap) {
	for attempt := 0; ; attempt++ {
		var set compareSet
		ops := make([]meta.Op, 0, len(snaps))
		for _, s := range snaps {
			set.add(s.cmps)
			ops = append(ops, meta.Put(producersKey(s.p.t.id, s.p.id), s.val))
		}
		err := e.md.Txn(e.ctx, set.list, ops...)
		switch {
		case err == nil:
			return
		case !isConflict(err):
			e.log.Warn("producer snapshot failed; next pass retries", "partitions", len(snaps), "err", err)
			e.snapMu.Lock()
			for _, s := range snaps {
				e.prodDirty[s.p] = struct{}{}
			}
			e.snapMu.Unlock()
			return
		}
		// Leadership gone for some (the next leader rebuilds from what is
		// registered), or the fence moved under the others.
		moved := attempt < maxFenceRetries && e.fenceMoved(e.ctx, err)
		led := snaps[:0:0]
		changed := false
		for _, s := range snaps {
			c, ok := e.fenceOf(s.p, s.epoch)
			if !ok {
				changed = true
				continue
			}
			if !sameCompares(c, s.cmps) {
				changed = true
				s.cmps = c
			}
			led = append(led, s)
		}
		snaps = led
		switch {
		case len(snaps) == 0:
			return
		case changed && moved:
			continue
		case len(snaps) > 1:
			for i := range snaps {
				e.writeSnapshots(snaps[i : i+1])
			}
			return
		default:
			return
		}
	}
}
