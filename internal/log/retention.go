package log

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// DefaultCleanerBackoff is the pause between compaction passes unless
// SetCleanerBackoff says otherwise (Kafka's log.cleaner.backoff.ms default).
const DefaultCleanerBackoff = 15 * time.Second

// SetCleanerBackoff sets the pause between compaction passes over the
// compacted topics this broker leads (log.cleaner.backoff.ms). It takes
// effect at once; 0 means the default.
func (e *Engine) SetCleanerBackoff(d time.Duration) {
	if d <= 0 {
		d = DefaultCleanerBackoff
	}
	if time.Duration(e.cleanerBackoff.Swap(int64(d))) != d {
		select {
		case e.cleanerKick <- struct{}{}:
		default:
		}
	}
}

func (e *Engine) cleanerPause() time.Duration {
	if d := time.Duration(e.cleanerBackoff.Load()); d > 0 {
		return d
	}
	return DefaultCleanerBackoff
}

// cleanLoop runs retention, compaction, producer state expiry and object
// garbage collection every RetentionCheckInterval, and compaction also
// every cleaner backoff, one pass at a time.
func (e *Engine) cleanLoop() {
	defer e.bg.Done()
	t := time.NewTicker(e.cfg.RetentionCheckInterval)
	defer t.Stop()
	ct := time.NewTimer(e.cleanerPause())
	defer ct.Stop()
	if !e.shared() {
		e.collectGarbage(e.ctx) // orphans and dead objects found by Open
	}
	for {
		select {
		case <-t.C:
			e.cleanOnce(e.ctx)
			if e.shared() {
				if err := e.collectShared(e.ctx); err != nil {
					e.log.Warn("cluster garbage collection failed; next pass retries", "err", err)
				}
			}
		case <-ct.C:
			e.cleanPartitions(e.ctx, true)
			ct.Reset(e.cleanerPause())
		case <-e.cleanerKick:
			ct.Reset(e.cleanerPause())
		case <-e.ctx.Done():
			return
		}
	}
}

// cleanOnce is one pass of everything the clean loop does.
func (e *Engine) cleanOnce(ctx context.Context) {
	e.cleanPartitions(ctx, false)
	e.cleanPartitions(ctx, true)
	e.collectGarbage(ctx)
}

// cleanPartitions runs retention and producer expiry, or compaction, over
// the partitions this broker leads, paced (pace.go): over 100,000
// partitions a pass yields between each and keeps to Config.CleanerShare.
func (e *Engine) cleanPartitions(ctx context.Context, compact bool) {
	start := time.Now()
	e.mu.RLock()
	topics := make([]*topic, 0, len(e.topics))
	for _, t := range e.topics {
		topics = append(topics, t)
	}
	e.mu.RUnlock()
	var pc *pacer
	var bufs *compactBufs
	if compact {
		pc = e.newPacer(ctx, e.cfg.CompactBytesPerSec)
		bufs = &compactBufs{}
		defer bufs.release() // the key map may be outside the heap
	} else {
		pc = e.newPacer(ctx, 0)
	}
	cutoff := e.producerCutoff()
	due := 0
	for _, t := range topics {
		cfg := t.cfg.Load()
		if compact && !cfg.Compact {
			continue
		}
		for _, p := range t.partitions() {
			if !pc.yield() {
				return
			}
			if !p.Led() {
				continue // cluster mode: another broker's partition
			}
			if compact {
				d, err := p.compactWith(ctx, pc, bufs)
				if d {
					due++
				}
				if err != nil {
					e.log.Warn("compaction failed", "topic", t.name, "partition", p.id, "err", err)
				}
				continue
			}
			p.expireProducers(cutoff)
			if cfg.Delete {
				if err := p.applyRetention(ctx); err != nil {
					e.log.Warn("retention failed", "topic", t.name, "partition", p.id, "err", err)
				}
			}
		}
	}
	if compact {
		e.m.compactionDue.Set(float64(due))
		e.m.compactionPassSeconds.Observe(time.Since(start).Seconds())
	} else {
		e.m.retentionPassSeconds.Observe(time.Since(start).Seconds())
	}
}

// unit is a retention unit: a rolled extent or an unrolled tail batch.
type unit struct {
	last, maxTS, size int64
}

// applyRetention advances the log start past data that retention.ms or
// retention.bytes says to delete. Whole extents and whole tail batches go
// at once, oldest first, and only below the high watermark.
func (p *Partition) applyRetention(ctx context.Context) error {
	cfg := p.t.cfg.Load()
	if cfg.RetentionMs < 0 && cfg.RetentionBytes < 0 {
		return nil
	}
	p.mu.RLock()
	if p.deleted {
		p.mu.RUnlock()
		return nil
	}
	hw, ls := p.hw.Load(), p.logStart.Load()
	units := make([]unit, 0, len(p.extents)+len(p.tail))
	for _, x := range p.extents {
		if x.Last >= ls {
			units = append(units, unit{x.Last, x.MaxTS, x.Size})
		}
	}
	for _, t := range p.tail {
		if t.rolled && len(p.extents) > 0 && t.last <= p.extents[len(p.extents)-1].Last {
			continue // also counted in an extent
		}
		if t.last >= ls && t.last < hw {
			units = append(units, unit{t.last, t.maxTS, int64(len(t.data))})
		}
	}
	p.mu.RUnlock()

	newStart := ls
	i := 0
	if cfg.RetentionMs >= 0 {
		cutoff := p.e.nowMs() - cfg.RetentionMs
		for ; i < len(units) && units[i].maxTS < cutoff; i++ {
			newStart = units[i].last + 1
		}
	}
	if cfg.RetentionBytes >= 0 {
		var total int64
		for _, u := range units[i:] {
			total += u.size
		}
		// As Kafka: delete a unit while what remains would still be at
		// least retention.bytes.
		for ; i < len(units) && total-units[i].size >= cfg.RetentionBytes; i++ {
			total -= units[i].size
			newStart = units[i].last + 1
		}
	}
	if newStart <= ls {
		return nil
	}
	_, err := p.setLogStart(ctx, newStart)
	return err
}

// DeleteRecords advances the log start offset to before (-1 means the high
// watermark), durably, and returns the new low watermark.
func (p *Partition) DeleteRecords(ctx context.Context, before int64) (int64, error) {
	if p.e.closed.Load() {
		return 0, ErrClosed
	}
	p.mu.RLock()
	err := p.checkLive()
	p.mu.RUnlock()
	if err != nil {
		return 0, err
	}
	hw := p.hw.Load()
	if before == -1 {
		before = hw
	}
	if before < 0 || before > hw {
		return 0, fmt.Errorf("%w: delete before %d, high watermark %d", ErrOffsetOutOfRange, before, hw)
	}
	return p.setLogStart(ctx, before)
}

// setLogStart persists a new log start offset (if higher), then drops the
// data below it from memory and releases extents wholly below it.
func (p *Partition) setLogStart(ctx context.Context, ls int64) (int64, error) {
	p.lsMu.Lock()
	defer p.lsMu.Unlock()
	cur := p.logStart.Load()
	if ls <= cur {
		return cur, nil
	}
	if err := p.e.md.Txn(ctx, nil, meta.Put(pstateKey(p.t.id, p.id), []byte(strconv.FormatInt(ls, 10)))); err != nil {
		return cur, fmt.Errorf("%w: persist log start: %v", ErrStorage, err)
	}
	p.mu.Lock()
	if p.deleted {
		p.mu.Unlock()
		return cur, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, p.t.name, p.id)
	}
	p.logStart.Store(ls)
	if c := p.cold.Load(); c != nil {
		c.txns.truncate(ls)
	}
	var dead, keep []*extent
	for _, x := range p.extents {
		if x.Last < ls {
			dead = append(dead, x)
		} else {
			keep = append(keep, x)
		}
	}
	if len(dead) > 0 {
		p.extents = keep
	}
	// Tail batches below the start are never read again; the roller works
	// from the WAL file, so unrolled ones can go too.
	k, freed := 0, int64(0)
	for k < len(p.tail) && p.tail[k].last < ls {
		if p.tail[k].owned {
			freed += int64(len(p.tail[k].data))
		}
		k++
	}
	p.dropTail(k)
	p.mu.Unlock()
	p.e.tailBytes.Add(-freed)
	p.e.releaseExtents(dead)
	return ls, nil
}

// deleteChunkBytes is how much of a dead object is freed at a time.
const deleteChunkBytes = 8 << 20

// shrinkDead frees a large dead object from its end, deleteChunkBytes at a
// time at the paced rate, when the store can shrink objects in place; Delete
// then removes what is left. It returns false if ctx ended first. A store
// error is only logged: Delete frees the object whole instead.
func (e *Engine) shrinkDead(ctx context.Context, o *object) bool {
	sh, ok := e.store.(objstore.Shrinker)
	if !ok || e.cfg.DeleteBytesPerSec <= 0 {
		return true
	}
	for size := o.size - deleteChunkBytes; size > 0; size -= deleteChunkBytes {
		if err := sh.Shrink(ctx, o.key, size); err != nil {
			if ctx.Err() != nil {
				return false
			}
			e.log.Warn("shrinking a dead data object failed; deleting it whole", "key", o.key, "err", err)
			return true
		}
		if !e.paceDelete(ctx, deleteChunkBytes) {
			return false
		}
	}
	return true
}

// paceDelete waits after deleting size bytes, so that deletions run at
// about Config.DeleteBytesPerSec. It returns false if ctx ended first.
func (e *Engine) paceDelete(ctx context.Context, size int64) bool {
	rate := e.cfg.DeleteBytesPerSec
	if rate <= 0 || size <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(time.Duration(float64(size) / float64(rate) * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// collectGarbage unregisters objects no partition references any more and
// deletes from storage the ones unregistered by the previous pass (so a read
// that picked an extent just before it was released still finds its object).
// Deletions are paced by Config.DeleteBytesPerSec, unregistering by
// Config.CleanerShare.
func (e *Engine) collectGarbage(ctx context.Context) {
	start := time.Now()
	defer func() { e.m.gcPassSeconds.Observe(time.Since(start).Seconds()) }()
	e.objMu.Lock()
	remove := e.toRemove
	e.toRemove = nil
	e.deleting = remove
	unlinked := e.unlinked
	e.unlinked = nil
	e.objMu.Unlock()

	// requeue puts back what this pass leaves for the next.
	requeue := func(objs []*object) {
		e.objMu.Lock()
		e.toRemove = append(e.toRemove, objs...)
		e.deleting = nil
		e.objMu.Unlock()
	}
	for i, o := range remove {
		if !e.shrinkDead(ctx, o) {
			requeue(remove[i:])
			break
		}
		if err := e.store.Delete(ctx, o.key); err != nil {
			e.log.Warn("deleting data object failed; will retry", "key", o.key, "err", err)
			e.objMu.Lock()
			e.toRemove = append(e.toRemove, o)
			e.deleting = remove[i+1:]
			e.objMu.Unlock()
			continue
		}
		e.m.objectsFreed.Inc()
		e.objMu.Lock()
		e.deleting = remove[i+1:]
		e.objMu.Unlock()
		if !e.paceDelete(ctx, min(o.size, deleteChunkBytes)) {
			requeue(remove[i+1:])
			break
		}
	}
	pc := e.newPacer(ctx, 0)
	for len(unlinked) > 0 {
		n := min(len(unlinked), meta.MaxTxnOps)
		ops := make([]meta.Op, n)
		for i, o := range unlinked[:n] {
			ops[i] = meta.Delete(keyObjects + o.key)
		}
		if err := e.md.Txn(ctx, nil, ops...); err != nil {
			e.log.Warn("unregistering data objects failed; will retry", "err", err)
			e.objMu.Lock()
			e.unlinked = append(e.unlinked, unlinked...)
			e.objMu.Unlock()
			return
		}
		e.objMu.Lock()
		for _, o := range unlinked[:n] {
			delete(e.objects, o.key)
			e.toRemove = append(e.toRemove, o)
			e.m.objects.Dec()
		}
		e.objMu.Unlock()
		for _, o := range unlinked[:n] {
			e.cache.drop(o)
		}
		unlinked = unlinked[n:]
		if len(unlinked) > 0 && !pc.yield() {
			e.objMu.Lock()
			e.unlinked = append(e.unlinked, unlinked...)
			e.objMu.Unlock()
			return
		}
	}
}

// gcPending is the objects awaiting deletion (unregistered or not yet)
// and their bytes.
func (e *Engine) gcPending() (objects int, bytes int64) {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	for _, l := range [][]*object{e.unlinked, e.toRemove, e.deleting} {
		objects += len(l)
		for _, o := range l {
			bytes += o.size
		}
	}
	return objects, bytes
}
