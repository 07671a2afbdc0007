package log

// The cluster-mode flush path: a group commit becomes objects in the
// object store, registered in the metadata store under the leadership
// compares (docs/cluster.md). Acquire, Release and recovery are in
// shared.go; producer snapshots in sharedsnap.go.

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/meta"
)

// flushRun is one partition's batches in a flush.
type flushRun struct {
	p       *Partition
	epoch   int32
	loadSeq uint64
	batches [][]byte
	bytes   int
	last    int64
}

// flushSharedAsync is the WAL sink in shared mode. In the writer goroutine
// it turns one group commit into objects, and starts their PUTs (retrying
// storage outages until the engine closes); the registration goroutine
// registers stored objects in order under the leadership compares and
// settles the group. The writer waits for the PUTs only up to the hedge
// delay: a group behind a slow PUT is built and PUT alongside it instead
// of after it. Only a lost leadership fails a partition's part of a group
// (Append sees that through loadSeq and answers NOT_LEADER_OR_FOLLOWER).
func (e *Engine) flushSharedAsync(bufs [][]byte, _ []wal.Item, settle func(error)) {
	start := time.Now()
	runs := e.flushRuns(bufs)
	sort.Slice(runs, func(i, j int) bool {
		a, b := runs[i].p, runs[j].p
		if c := bytes.Compare(a.t.id[:], b.t.id[:]); c != 0 {
			return c < 0
		}
		return a.id < b.id
	})
	job := &regJob{settle: settle, start: start, ready: make(chan struct{})}
	var bodies [][]byte
	for len(runs) > 0 && job.err == nil {
		var o *pendingObject
		var body []byte
		if o, body, runs, job.err = e.buildObject(runs); o != nil {
			o.body = body
			job.objs = append(job.objs, o)
			bodies = append(bodies, body)
		}
	}
	go func() {
		// Counted once ready is closed (defers run last first), so that
		// what the counter shows is ready for the registration goroutine.
		defer func() {
			if job.err == nil {
				e.m.sharedStored.Add(float64(len(job.objs)))
			}
		}()
		defer close(job.ready)
		if job.err != nil {
			return
		}
		errs := make([]error, len(job.objs))
		var wg sync.WaitGroup
		for i, o := range job.objs {
			wg.Go(func() { errs[i] = e.putObject(o, bodies[i]) })
		}
		wg.Wait()
		job.err = errors.Join(errs...)
	}()
	e.regCh <- job
	wait, ok := e.putTimes.hedgeAfter()
	if !ok {
		<-job.ready
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-job.ready:
	case <-t.C:
	}
}

// flushRuns splits a group's entries into per-partition runs, leaving out
// partitions released or re-acquired since the append.
func (e *Engine) flushRuns(bufs [][]byte) []*flushRun {
	var runs []*flushRun
	byP := map[*Partition]*flushRun{}
	for _, buf := range bufs {
		for len(buf) > 0 {
			ent, n, err := wal.DecodeHeader(buf)
			if err != nil {
				// Only zero-length barrier reservations leave gaps; they
				// are never in the middle of a buffer with data after.
				break
			}
			buf = buf[n:]
			p := e.partitionByID(ent.TopicID, ent.Partition)
			if p == nil {
				continue
			}
			r := byP[p]
			if r == nil {
				p.mu.RLock()
				ok := p.led && batch.LeaderEpoch(ent.Batch) == p.epoch
				seq := p.loadSeq
				p.mu.RUnlock()
				r = &flushRun{p: p, epoch: batch.LeaderEpoch(ent.Batch), loadSeq: seq}
				byP[p] = r
				if !ok {
					r.p = nil // fenced or released since the append
				} else {
					runs = append(runs, r)
				}
			}
			if r.p == nil {
				continue
			}
			r.batches = append(r.batches, ent.Batch)
			r.bytes += len(ent.Batch)
			r.last = batch.LastOffset(ent.Batch)
		}
	}
	return runs
}

// pendingObject is a flush object stored but not yet registered.
type pendingObject struct {
	runs     []*flushRun
	exts     []segment.Extent // per run
	key      string
	gen      uint64
	size     int64
	deadline time.Time // register by then or give up (orphan grace)
	// body is the object's bytes, kept until it is registered and they go
	// to the block cache for readers of the new data.
	body []byte
}

// regJob is one group for the registration goroutine.
type regJob struct {
	ready  chan struct{} // closed once objs are stored or err is set
	objs   []*pendingObject
	err    error // storing failed: the engine is closing
	settle func(error)
	start  time.Time // handed to the sink
}

// registerLoop registers stored flush objects in order and settles their
// groups. It ends when regCh is closed (engine Close, after the WAL).
//
// Groups that queued up while a registration ran (a slow etcd round trip)
// are registered together, in one Txn where their compares allow: the
// queue drains in one round trip instead of one per group. A group whose
// objects are still being stored ends the batch and starts the next one.
func (e *Engine) registerLoop() {
	defer close(e.regDone)
	var next *regJob
	for {
		job := next
		if job == nil {
			var ok bool
			if job, ok = <-e.regCh; !ok {
				return
			}
		}
		next = nil
		<-job.ready
		jobs := []*regJob{job}
	more:
		for len(jobs) < maxRegisterJobs {
			select {
			case j, ok := <-e.regCh:
				if !ok {
					break more
				}
				select {
				case <-j.ready:
					jobs = append(jobs, j)
				default:
					next = j
					break more
				}
			default:
				break more
			}
		}
		e.registerJobs(jobs)
	}
}

// maxRegisterJobs bounds the groups registered in one pass.
const maxRegisterJobs = 32

// registerTogetherBytes bounds the object records registered in one Txn,
// within etcd's default request limit (1.5 MiB).
const registerTogetherBytes = 1 << 20

// registerJobs registers the objects of jobs in order, in as few Txns as
// the compares allow, and settles each job. Registration fails only when
// the engine is closing: that job and every later one fail (some of their
// objects may be registered; clients retry, idempotent ones without
// effect).
func (e *Engine) registerJobs(jobs []*regJob) {
	var objs []*pendingObject
	var owner []int // job index of each object
	failFrom, failErr := len(jobs), error(nil)
	for i, job := range jobs {
		if job.err != nil {
			failFrom, failErr = i, job.err
			break
		}
		for _, o := range job.objs {
			objs = append(objs, o)
			owner = append(owner, i)
		}
	}
	for k := 0; k < len(objs); {
		t := time.Now()
		n := e.registerTogether(objs[k:])
		if n == 0 {
			if err := e.registerObject(objs[k]); err != nil {
				failFrom, failErr = owner[k], err
				break
			}
			n = 1
		}
		d := time.Since(t).Seconds()
		for range n {
			e.m.sharedRegisterSeconds.Observe(d)
		}
		k += n
	}
	for i, job := range jobs {
		var err error
		if i >= failFrom {
			err = failErr
		}
		job.settle(err)
		e.m.sharedGroupSeconds.Observe(time.Since(job.start).Seconds())
	}
}

// registerTogether registers the leading objects of objs in one Txn, if at
// least two can go together: every run of each still current (no
// partition released or re-acquired since it was stored), compares that
// agree where partitions repeat, all within meta.MaxTxnOps and the objects'
// deadlines. It returns how many it registered; 0 leaves objs[0] to
// registerObject, which handles fencing one object at a time.
func (e *Engine) registerTogether(objs []*pendingObject) int {
	var set compareSet
	var ops []meta.Op
	var recs []*objectRecord
	deadline := time.Time{}
	now := time.Now()
	size := 0
	for _, o := range objs {
		if len(ops) == meta.MaxTxnOps || now.After(o.deadline) {
			break
		}
		// The compares of every run, as Fence gives them now: all still
		// led at their epoch, or the object is left to registerObject.
		var add []meta.Compare
		fits := true
		for _, r := range o.runs {
			r.p.mu.RLock()
			current := r.p.loadSeq == r.loadSeq
			r.p.mu.RUnlock()
			c, led := e.fenceOf(r.p, r.epoch)
			if !current || !led {
				fits = false
				break
			}
			add = append(add, c...)
		}
		rec := &objectRecord{Gen: o.gen, WALSeq: walSeqFlush, Size: o.size, Extents: o.exts}
		val := encodeObject(rec)
		if !fits || size+len(val) > registerTogetherBytes || !set.add(add) {
			break
		}
		size += len(val)
		recs = append(recs, rec)
		ops = append(ops, meta.Put(keyObjects+o.key, val))
		if deadline.IsZero() || o.deadline.Before(deadline) {
			deadline = o.deadline
		}
	}
	cmps := set.list
	n := len(recs)
	if n < 2 {
		return 0
	}
	var conflict, expired bool
	e.retry(fmt.Sprintf("register %d objects from %s", n, objs[0].key), func() error {
		if time.Now().After(deadline) {
			expired = true
			return nil
		}
		err := e.md.Txn(e.ctx, cmps, ops...)
		if isConflict(err) {
			conflict = true
			return nil
		}
		return err
	})
	if conflict || expired || e.ctx.Err() != nil {
		return 0 // nothing registered; registerObject takes it from here
	}
	e.m.sharedRegisterTxns.Inc()
	e.m.sharedRegistered.Add(float64(n))
	for i, o := range objs[:n] {
		all := make([]int, len(o.runs))
		for j := range all {
			all[j] = j
		}
		e.applyRegistered(o, recs[i], all)
	}
	return n
}

// buildObject builds one object for the runs at the front of runs whose
// leadership holds, as many as one registration Txn can compare
// (MaxPartitionsPerObject partitions, meta.MaxTxnOps distinct compares), gives it a
// key, and returns it with its bytes and the runs left for the next
// object. The object is nil (with no error) when no leadership held.
func (e *Engine) buildObject(runs []*flushRun) (*pendingObject, []byte, []*flushRun, error) {
	o := &pendingObject{deadline: time.Now().Add(e.cfg.Shared.OrphanGrace / 2)}
	var set compareSet
	for len(runs) > 0 && len(o.runs) < e.cfg.Shared.MaxPartitionsPerObject {
		r := runs[0]
		c, ep, ok := e.cfg.Shared.Fence(r.p.t.name, r.p.id)
		if ok && ep == r.epoch && !set.add(c) && len(o.runs) > 0 {
			break // the next object's
		}
		runs = runs[1:]
		if !ok || ep != r.epoch {
			// Released, or released and acquired again at a new epoch
			// (whose state was rebuilt without these batches): they
			// must not be registered. Their appends see loadSeq moved.
			if !ok {
				e.fence(r.p)
			}
			continue
		}
		o.runs = append(o.runs, r)
	}
	if len(o.runs) == 0 {
		return nil, nil, runs, nil
	}
	size := 0
	for _, r := range o.runs {
		size += r.bytes
	}
	b := segment.NewBuilderSize(0, size, len(o.runs))
	for _, r := range o.runs {
		b.StartExtent(r.p.t.id, r.p.id, batch.BaseOffset(r.batches[0]))
		for _, bt := range r.batches {
			b.AddBatch(bt)
		}
		b.EndExtent(r.last)
	}
	body, exts := b.Finish()
	o.exts, o.size = exts, int64(len(body))
	var keyErr error
	e.retry("allocate object key", func() error {
		o.key, o.gen, keyErr = e.nextObjectKey(e.ctx)
		return keyErr
	})
	if keyErr != nil {
		return nil, nil, runs, fmt.Errorf("%w: flush not stored before the engine closed", ErrClosed)
	}
	return o, body, runs, nil
}

// putObject stores o's bytes, hedged, retrying until the engine closes.
func (e *Engine) putObject(o *pendingObject, body []byte) error {
	start := time.Now()
	var putErr error
	e.retry("put "+o.key, func() error {
		putErr = e.putHedged(e.ctx, o.key, body)
		return putErr
	})
	if putErr != nil {
		return fmt.Errorf("%w: flush not stored before the engine closed", ErrClosed)
	}
	e.m.objectBytes.Add(float64(len(body)))
	e.m.sharedPutSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// registerObject registers o for the runs whose leadership still holds,
// under the compares Fence gives at the time. A compare that fails drops
// the runs whose leadership this broker now knows is gone and is tried
// again for the rest (their bytes stay in the object as dead data), and
// also when the fence only moved under runs still led (RefreshFence).
// Runs whose partition was released or acquired again since the object
// was built are left out: a later group must never be registered past an
// earlier one that was dropped.
func (e *Engine) registerObject(o *pendingObject) error {
	keep := make([]bool, len(o.runs))
	for j, r := range o.runs {
		r.p.mu.RLock()
		keep[j] = r.p.loadSeq == r.loadSeq
		r.p.mu.RUnlock()
	}
	var rec objectRecord
	var kept []int
	var prev []meta.Compare
	prevKept := -1
	for attempt := 0; ; attempt++ {
		var set compareSet
		rec = objectRecord{Gen: o.gen, WALSeq: walSeqFlush, Size: o.size}
		kept = kept[:0]
		for j, r := range o.runs {
			if !keep[j] {
				continue
			}
			c, ep, ok := e.cfg.Shared.Fence(r.p.t.name, r.p.id)
			if !ok || ep != r.epoch {
				// Released, or released and acquired again at a new
				// epoch: never registered (its appends see loadSeq move).
				keep[j] = false
				if !ok {
					e.fence(r.p)
				}
				continue
			}
			set.add(c) // fits: the build kept the object's compares within one Txn
			rec.Extents = append(rec.Extents, o.exts[j])
			kept = append(kept, j)
		}
		if len(kept) == 0 {
			return nil // all fenced; the object is garbage
		}
		if attempt > 0 && len(kept) == prevKept && sameCompares(set.list, prev) {
			// A compare failed that this broker's view of the cluster
			// does not explain: give every partition up (below).
			break
		}
		prev, prevKept = set.list, len(kept)
		var conflict, expired bool
		var cerr error
		e.retry("register "+o.key, func() error {
			if time.Now().After(o.deadline) {
				expired = true
				return nil
			}
			err := e.md.Txn(e.ctx, set.list, meta.Put(keyObjects+o.key, encodeObject(&rec)))
			if isConflict(err) {
				conflict, cerr = true, err
				return nil
			}
			return err
		})
		if e.ctx.Err() != nil {
			return fmt.Errorf("%w: flush not registered before the engine closed", ErrClosed)
		}
		if !conflict && !expired {
			e.m.sharedRegisterTxns.Inc()
			e.m.sharedRegistered.Inc()
			e.applyRegistered(o, &rec, kept)
			return nil
		}
		if expired || attempt == maxFenceRetries {
			break
		}
		e.fenceMoved(e.ctx, cerr)
	}
	// Out of time (the controller may soon take the object for an
	// orphan), or a compare failed that this broker's view of the cluster
	// does not explain yet: give every partition up. Those still ours are
	// acquired again at a new epoch, rebuilt from what is registered.
	e.log.Warn("flush not registered; releasing its partitions", "object", o.key,
		"partitions", len(kept), "timed_out", time.Now().After(o.deadline))
	for _, j := range kept {
		e.fence(o.runs[j].p)
	}
	return nil
}

// applyRegistered makes the kept runs of o, registered as rec, visible:
// their extents join the partitions, their producer state folds into the
// snapshot state, and the high watermarks move past them.
func (e *Engine) applyRegistered(o *pendingObject, rec *objectRecord, kept []int) {
	obj := e.sharedObject(o.key, rec)
	// Before the extents are visible: consumers of what was just produced
	// read it from memory, not back from the store.
	e.cache.fill(obj, o.body)
	o.body = nil
	kick := false
	e.snapMu.Lock()
	for _, j := range kept {
		p := o.runs[j].p
		for _, bt := range o.runs[j].batches {
			e.foldRolledShared(p, bt)
		}
		p.c().unsnapExtents++
		if e.snapshotOverdue(p) {
			if e.prodDirty == nil {
				e.prodDirty = map[*Partition]struct{}{}
			}
			e.prodDirty[p] = struct{}{}
			kick = true
		}
	}
	e.snapMu.Unlock()
	if kick {
		select {
		case e.snapKick <- struct{}{}:
		default:
		}
	}
	for _, j := range kept {
		r := o.runs[j]
		x := &extent{Extent: o.exts[j], obj: obj}
		r.p.markRolled([]*extent{x}, r.last, e.cfg.TailBytesPerPartition)
		r.p.advanceHW(r.last + 1)
	}
}

// retry runs fn until it succeeds or the engine closes, backing off up to
// 250 ms. Storage and meta outages are waited out: appends stay pending
// meanwhile, and clients see request timeouts, which they retry. The short
// cap is what lets produce resume within moments of the store coming back
// (an etcd outage stalls produce for the outage plus at most 2 s); an
// attempt against a store that is down costs one failed request.
func (e *Engine) retry(what string, fn func() error) {
	backoff := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || e.ctx.Err() != nil {
			return
		}
		e.log.Warn("cluster flush step failed; retrying", "step", what, "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-e.ctx.Done():
			return
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// fence releases p after its leadership was found gone, and tells the
// cluster layer.
func (e *Engine) fence(p *Partition) {
	e.Release(p.t.name, p.id, true)
	if e.cfg.Shared.OnFenced != nil {
		e.cfg.Shared.OnFenced(p.t.name, p.id)
	}
}
