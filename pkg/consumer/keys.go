package consumer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// keyID names one ordering lane: the records of one key of one partition
// of a main topic, and their copies in its retry topic. Records with a null
// key share one lane per partition.
type keyID struct {
	topic string // the main topic
	p     int32
	key   string
	null  bool
}

// keyState is one lane. queue, front, tag, tail and running are guarded by
// Consumer.mu; the park state (heads, held, pending) belongs to the lane's
// goroutine, or to ensureScanned before any goroutine runs for the lane.
type keyState struct {
	id      keyID
	queue   []segment // the lane's records, fetch by fetch: see fetchBatch
	front   []item    // records to run before queue (deferred ones now due)
	tag     *fetchBatch
	tail    int32 // the lane's last record in tag so far (dispatch)
	running bool
	dead    atomic.Bool
	swept   bool               // found idle by the last sweep (guarded by Consumer.mu)
	actx    *attemptCtx        // the lane goroutine's; kept between its runs
	m       *topicMetrics      // nil without Metrics
	counted atomic.Bool        // counted in the keys_held gauge
	cancel  context.CancelFunc // stops the lane's handler when its partition goes

	// heads are the records of the key waiting in the retry topic, oldest
	// first; while there is one, later records of the key wait (parking).
	heads []head
	// held are retry-topic records read while an older head was still
	// waiting; they run, in order, when it is done.
	held []*item
	// pending counts the key's records written to the retry topic and not
	// yet read back. While it is not zero, new records of the key are
	// parked behind them.
	pending int
	// waiting counts the key's records set aside until their due time
	// (ExactlyOnce: a transaction does not wait for a delay).
	waiting int
}

type head struct {
	id     string // Origin.ID of the record
	marker *item  // the KindHold record, left unfinished until the head is done
}

func (ks *keyState) idle() bool {
	return len(ks.heads) == 0 && len(ks.held) == 0 && ks.pending == 0 && ks.waiting == 0
}

// fetchBatch is one fetched partition's records as dispatch hands them to
// the lanes: no value per record is made or queued. A lane's records in it
// are a chain through next, starting at a segment's head: dispatch writes
// one int32 per record (no pointer, so no write barrier and nothing for
// the collector to scan), and a lane queues one segment per fetch.
type fetchBatch struct {
	recs  []*kgo.Record
	next  []int32 // index of the next record of the same lane, -1 at its last
	tr    *tracker
	seq0  int64 // the sequence number of recs[0] in tr
	retry bool  // read from a retry topic
}

// segment is a lane's records in one fetchBatch.
type segment struct {
	b    *fetchBatch
	head int32
}

// item makes the lane's working value for record i of b.
func (b *fetchBatch) item(i int32) item {
	it := item{rec: b.recs[i], tr: b.tr, seq: b.seq0 + int64(i), retry: b.retry, counted: !b.retry}
	if b.retry {
		info, err := DecodeRetryInfo(it.rec)
		it.info = &itemInfo{info, err}
	}
	return it
}

// count is the number of records in the chain from i.
func (b *fetchBatch) count(i int32) int64 {
	n := int64(0)
	for ; i >= 0; i = b.next[i] {
		n++
	}
	return n
}

// item is one record being handled by a lane: made from its fetchBatch
// when its turn comes, and good only while the lane works on it. An item
// kept longer (held, a hold marker, set aside until due) is cloned to the
// heap.
type item struct {
	rec      *kgo.Record
	tr       *tracker
	seq      int64     // the record's sequence number in tr
	info     *itemInfo // nil for a main-topic record not yet failed: see retryInfo
	retry    bool      // read from a retry topic
	counted  bool      // counts in Consumer.buffered until released
	deferred bool      // set aside until due, now back: handle it at once
	readBack bool      // counted off its key's pending
}

// itemInfo is what a retry-topic record's headers say (or a failed
// record's state), and the error when they are malformed.
type itemInfo struct {
	RetryInfo
	bad error
}

// clone is a heap copy of it, for keeping past its batch.
func (it *item) clone() *item {
	c := *it
	return &c
}

// retryInfo is what the item's headers say, or, for a main-topic record,
// the record as its own origin with no attempts.
func (it *item) retryInfo() RetryInfo {
	if it.info != nil {
		return it.info.RetryInfo
	}
	r := it.rec
	return RetryInfo{Origin: Origin{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}}
}

type attemptKey struct{}

// attemptCtx carries the attempt number without an allocation per call: a
// lane reuses one for all its calls, so a handler must not keep its context
// after returning (as with any per-call context).
type attemptCtx struct {
	context.Context
	n int
	// Handled records not yet marked finished (flushDone): their
	// tracker, sequence numbers, and how many count in buffered.
	doneTr *tracker
	seqs   []int64
	doneN  int64
	emits  []*kgo.Record // Emit's records of the current run
	m      *topicMetrics // the lane's, nil without Metrics
}

func (a *attemptCtx) Value(k any) any {
	switch k.(type) {
	case attemptKey:
		return a.n
	case emitKey:
		return a
	}
	return a.Context.Value(k)
}

// Attempt is the handler run this is for the record being handled: 1 on
// the first, counting every earlier run, blocking or from the retry topic.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

func (c *Consumer) release(it *item) {
	if it.counted {
		it.counted = false
		c.released(1)
	}
}

// released takes n from buffered and wakes the poll loop when that brings
// it to half of MaxBuffered.
func (c *Consumer) released(n int64) {
	half := int64(c.cfg.maxBuffered / 2)
	if now := c.buffered.Add(-n); now <= half && now+n > half {
		select {
		case c.space <- struct{}{}:
		default:
		}
	}
}

// addDone notes it as handled; flushDone marks it finished. Until then it
// only holds the commit back, which is safe.
func (c *Consumer) addDone(ctx *attemptCtx, it *item) {
	if it.tr != ctx.doneTr {
		c.flushDone(ctx)
		ctx.doneTr = it.tr
	}
	ctx.seqs = append(ctx.seqs, it.seq)
	if it.counted {
		it.counted = false
		ctx.doneN++
	}
}

// flushDone marks the lane's handled records finished: one tracker lock
// per partition and batch instead of one per record.
func (c *Consumer) flushDone(ctx *attemptCtx) {
	if len(ctx.seqs) > 0 {
		ctx.doneTr.finishSeqs(ctx.seqs)
		ctx.seqs = ctx.seqs[:0]
	}
	if n := ctx.doneN; n > 0 {
		ctx.doneN = 0
		c.released(n)
	}
}

// finish marks it finished.
func (c *Consumer) finish(it *item) {
	it.tr.finishSeqs([]int64{it.seq})
	c.release(it)
}

// settle marks it finished after an outcome (handled, moved on, dead). With
// ExactlyOnce, a retry-topic record finished above an unfinished one first
// gets a done marker in the transaction: the group's offset cannot move
// past it yet, and a restart must not run it again. False when the marker
// could not be written (the transaction then aborts).
func (c *Consumer) settle(ctx context.Context, it *item) bool {
	if c.sess != nil && it.retry && it.tr.unfinishedBelow(it.seq) {
		if !c.send(ctx, doneRecord(it.rec, it.retryInfo().Origin)) {
			return false
		}
	}
	c.finish(it)
	return true
}

// runKey handles a lane's records one at a time until its queue is empty.
// lctx is the run's context, cancelled by cancel (which drop also calls).
func (c *Consumer) runKey(lctx context.Context, cancel context.CancelFunc, ks *keyState) {
	defer c.wg.Done()
	defer cancel()
	if ks.actx == nil {
		ks.actx = &attemptCtx{m: ks.m}
	}
	actx := ks.actx // one per lane: its buffers are kept between runs
	actx.Context = lctx
	defer func() { actx.Context, actx.doneTr = nil, nil }()
	stopped := lctx.Done()
	var (
		segs  []segment // taken from ks.queue, run from si on
		si    int
		b     *fetchBatch // the segment being run, from its record i
		i     = int32(-1)
		extra []item // run before the rest: released held records, due deferred ones
		cur   item   // the record being handled
	)
	for {
		switch {
		case len(extra) > 0:
			cur = extra[0]
			extra[0] = item{}
			extra = extra[1:]
		case i >= 0:
			cur = b.item(i)
			i = b.next[i]
		case si < len(segs):
			b, i = segs[si].b, segs[si].head
			segs[si] = segment{}
			si++
			continue
		default:
			// Done with what was taken: the segment slice goes back as
			// the lane's queue (two slices take turns).
			c.flushDone(actx)
			b = nil
			spare := segs[:0]
			if cap(spare) > maxSpareQueue {
				spare = nil
			}
			c.mu.Lock()
			if ks.dead.Load() || (len(ks.queue) == 0 && len(ks.front) == 0) {
				ks.running = false
				if c.metrics != nil {
					c.metrics.keysBusy.Dec()
				}
				if !ks.dead.Load() && cap(ks.queue) == 0 {
					ks.queue = spare
				}
				c.mu.Unlock()
				return
			}
			if len(ks.front) > 0 {
				extra = append(extra, ks.front...)
				ks.front = nil
			}
			segs, ks.queue, si = ks.queue, spare, 0
			c.mu.Unlock()
			continue
		}
		it := &cur
		if len(actx.seqs) >= 256 {
			c.flushDone(actx)
		}
		select {
		case <-stopped:
			c.flushDone(actx) // handled: finished, even when stopping
			c.release(it)
			continue
		default:
		}
		if ks.dead.Load() {
			c.flushDone(actx)
			c.release(it)
			continue
		}
		var again []*item
		if it.deferred {
			it.deferred = false
			again = c.handle(actx, ks, it)
		} else {
			again = c.process(actx, ks, it)
		}
		if len(again) > 0 {
			next := make([]item, 0, len(again)+len(extra))
			for _, h := range again {
				next = append(next, *h)
			}
			extra = append(next, extra...)
		}
	}
}

// maxSpareQueue bounds the queue memory (16 bytes an entry) an idle lane
// keeps.
const maxSpareQueue = 1024

// process applies the parking rules to one record and handles it when it is
// its turn. It returns held records that may now run, to go first.
func (c *Consumer) process(ctx *attemptCtx, ks *keyState, it *item) []*item {
	if !it.retry {
		if !ks.idle() && c.cfg.park && c.retryOf[ks.id.topic] != "" {
			// An older record of the key is in the retry topic: this one
			// queues behind it there, so the main partition moves on.
			info := it.retryInfo()
			if c.send(ctx, retryRecord(it.rec, c.retryOf[ks.id.topic], KindPark, info, 0, c.cfg.clock.Now(), c.sess == nil)) {
				ks.pending++
				c.finish(it)
				if ks.m != nil {
					ks.m.parked.Inc()
				}
			}
			return nil
		}
		// A main-topic record's first run, the common case, kept short
		// and out of handle (whose large frame is set up on every call).
		ctx.n = 1
		err := c.call(ctx, it.rec)
		if err == nil && len(ks.heads) == 0 {
			c.addDone(ctx, it)
			return nil
		}
		return c.handleAfter(ctx, ks, it, 1, err)
	}
	if it.info.bad == nil && it.info.Kind == KindDone {
		c.finish(it) // a note for restarts; nothing to do
		return nil
	}
	if !it.readBack {
		// Once per record: a held record comes through here again when
		// its key is released.
		it.readBack = true
		if ks.pending > 0 {
			ks.pending--
		}
	}
	if c.takeDone(it) {
		c.finish(it) // finished before a restart: its outcome is committed
		return nil
	}
	if it.info.bad != nil {
		// Not a record this convention wrote: nothing to retry by, so it
		// is a dead letter at once.
		return c.dead(ctx, ks, it, it.info.bad)
	}
	id := it.info.Origin.ID()
	if it.info.Kind == KindHold {
		for i := range ks.heads {
			if ks.heads[i].id == id && ks.heads[i].marker == nil {
				ks.heads[i].marker = it.clone()
				return nil
			}
		}
		c.settle(ctx, it) // its head is already done
		return nil
	}
	if c.cfg.park && len(ks.heads) > 0 && ks.heads[0].id != id {
		ks.held = append(ks.held, it.clone())
		return nil
	}
	return c.handle(ctx, ks, it)
}

// handle runs the handler up to Attempts times with backoff, then sends the
// record to the retry or the dead-letter topic.
func (c *Consumer) handle(ctx *attemptCtx, ks *keyState, it *item) []*item {
	return c.handleAfter(ctx, ks, it, 0, nil)
}

// handleAfter is handle for a record that already ran ran times in a row
// here (0 or 1), the last with err.
func (c *Consumer) handleAfter(ctx *attemptCtx, ks *keyState, it *item, ran int, err error) []*item {
	info := it.retryInfo()
	info.Attempts += ran
	if ran == 0 && !info.DueAt.IsZero() {
		c.flushDone(ctx)
		if c.sess != nil && info.DueAt.After(c.cfg.clock.Now()) {
			// A transaction cannot wait for a delay: set the record
			// aside, unfinished, and handle it in the first transaction
			// after it is due. Its key's later records wait behind it.
			c.deferUntil(ks, it.clone(), info.DueAt)
			return nil
		}
		if !c.waitUntil(ctx, info.DueAt) {
			return nil
		}
	}
	for i := ran; i < c.cfg.attempts && (i == 0 || err != nil); i++ {
		if i > 0 {
			c.flushDone(ctx)
			if !c.sleep(ctx, c.backoff(i)) {
				return nil
			}
		}
		info.Attempts++
		ctx.n = info.Attempts
		err = c.call(ctx, it.rec)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return nil // stopping: not finished, so read again after restart
	}
	if err == nil {
		if len(ks.heads) == 0 && (c.sess == nil || !it.retry) {
			c.addDone(ctx, it)
			return nil
		}
		if !c.settle(ctx, it) {
			return nil
		}
		return c.resolve(ctx, ks, info.Origin.ID())
	}
	deliveries := (info.Attempts + c.cfg.attempts - 1) / c.cfg.attempts
	rt := c.retryOf[ks.id.topic]
	if rt == "" || deliveries > len(c.cfg.retryDelays) {
		it.info = &itemInfo{RetryInfo: info} // a new value: taking info's address would move it to the heap on every call
		return c.dead(ctx, ks, it, err)
	}
	now := c.cfg.clock.Now()
	delay := c.cfg.retryDelays[deliveries-1]
	id := info.Origin.ID()
	if c.cfg.park && (len(ks.heads) == 0 || ks.heads[0].id != id) {
		// The hold marker goes first: it is readable at once even where
		// the broker keeps the delayed retry record back, so a restart
		// still knows the key is held.
		if !c.send(ctx, holdRecord(it.rec, rt, info.Origin, now.Add(delay))) {
			return nil
		}
		ks.heads = append([]head{{id: id}}, ks.heads...)
		c.noteHeld(ks)
		ks.pending++
	}
	if !c.send(ctx, retryRecord(it.rec, rt, KindRetry, info, delay, now, c.sess == nil)) {
		return nil
	}
	ks.pending++
	if ks.m != nil {
		ks.m.retried.Inc()
	}
	if !c.settle(ctx, it) {
		return nil
	}
	c.cfg.logger.Debug("record to retry topic", "id", id, "attempts", info.Attempts, "delay", delay, "err", err)
	return nil
}

// dead writes the record to the dead-letter topic and finishes it.
func (c *Consumer) dead(ctx *attemptCtx, ks *keyState, it *item, cause error) []*item {
	dt := c.dlqOf[ks.id.topic]
	info := it.retryInfo()
	r := deadRecord(it.rec, dt, c.cfg.group, info, cause, c.cfg.clock.Now())
	if n := c.dlqN[dt]; n > 0 {
		r.Partition = info.Origin.Partition % n
	}
	if !c.send(ctx, r) || !c.settle(ctx, it) {
		return nil
	}
	if ks.m != nil {
		ks.m.dead.Inc()
	}
	c.cfg.logger.Info("record to dead-letter topic", "id", info.Origin.ID(), "attempts", info.Attempts, "err", cause)
	return c.resolve(ctx, ks, info.Origin.ID())
}

// resolve ends the head id, if it is the key's first, and hands back the
// records held behind it.
func (c *Consumer) resolve(ctx context.Context, ks *keyState, id string) []*item {
	if len(ks.heads) == 0 || ks.heads[0].id != id {
		return nil
	}
	if m := ks.heads[0].marker; m != nil && !c.settle(ctx, m) {
		return nil
	}
	ks.heads = ks.heads[1:]
	c.noteHeld(ks)
	held := ks.held
	ks.held = nil
	return held
}

// call runs the handler and, when it succeeds, produces what it emitted.
func (c *Consumer) call(ctx *attemptCtx, r *kgo.Record) error {
	ctx.emits = ctx.emits[:0]
	var err error
	if m := ctx.m; m != nil {
		start := time.Now()
		err = c.run(ctx, r)
		m.latency.Observe(time.Since(start).Seconds())
	} else {
		err = c.run(ctx, r)
	}
	if err == nil && len(ctx.emits) > 0 {
		err = c.emit(ctx)
	}
	if m := ctx.m; m != nil && ctx.Err() == nil {
		if err == nil {
			m.handled.Inc()
		} else {
			m.failed.Inc()
		}
	}
	return err
}

// run runs the handler, turning a panic into an error.
func (c *Consumer) run(ctx context.Context, r *kgo.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return c.handler(ctx, r)
}

// send produces r until it is acknowledged or ctx ends (false).
func (c *Consumer) send(ctx context.Context, r *kgo.Record) bool {
	if a, ok := ctx.(*attemptCtx); ok {
		// The client may keep the context after the call returns; a
		// lane's attemptCtx is reused, its run's context is not.
		ctx = a.Context
	}
	for i := 1; ; i++ {
		err := c.produce(ctx, r)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if c.sess != nil {
			// A failed produce fails the transaction: abort it and
			// start again from the last commit.
			c.cfg.logger.Warn("produce failed; aborting the transaction", "topic", r.Topic, "err", err)
			c.failTxn()
			return false
		}
		c.cfg.logger.Warn("produce failed; trying again", "topic", r.Topic, "err", err)
		if !c.sleep(ctx, c.backoff(min(i, 10))) {
			return false
		}
	}
}

// backoff is the wait before blocking attempt n+1: equal jitter over an
// exponential step.
func (c *Consumer) backoff(n int) time.Duration {
	d := c.cfg.backoffBase << min(n-1, 30)
	if d <= 0 || d > c.cfg.backoffMax {
		d = c.cfg.backoffMax
	}
	return d/2 + time.Duration(c.cfg.random()*float64(d/2))
}

func (c *Consumer) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.cfg.clock.After(d):
		return true
	}
}

// waitUntil waits for a retry's due time: brokers that ignore
// HeaderDelayMs hand the record out at once.
func (c *Consumer) waitUntil(ctx context.Context, due time.Time) bool {
	if due.IsZero() {
		return ctx.Err() == nil
	}
	return c.sleep(ctx, due.Sub(c.cfg.clock.Now()))
}
