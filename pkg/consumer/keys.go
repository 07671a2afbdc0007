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

// keyState is one lane. queue and running are guarded by Consumer.mu; the
// park state (heads, held, pending) belongs to the lane's goroutine, or to
// ensureScanned before any goroutine runs for the lane.
type keyState struct {
	id      keyID
	queue   []item // by value: no allocation per record; see runKey
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

// item is one record handed to a lane, kept by value in the lane's queue
// (48 bytes, no allocation of its own). A pointer to a queued item is good
// only while its lane's goroutine works on that batch: an item kept longer
// (held, a hold marker, set aside until due) is cloned to the heap.
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
	n     int
	done  []*item       // handled, to be marked finished in one go (flushDone)
	seqs  []int64       // flushDone's buffer
	emits []*kgo.Record // Emit's records of the current run
	m     *topicMetrics // the lane's, nil without Metrics
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

// flushDone marks the lane's handled records finished: one tracker lock
// per partition and batch instead of one per record. Until then they only
// hold the commit back, which is safe.
func (c *Consumer) flushDone(ctx *attemptCtx) {
	if len(ctx.done) == 0 {
		return
	}
	var n int64
	for len(ctx.done) > 0 {
		tr := ctx.done[0].tr
		rest := ctx.done[:0]
		seqs := ctx.seqs[:0]
		for _, it := range ctx.done {
			if it.tr != tr {
				rest = append(rest, it)
				continue
			}
			seqs = append(seqs, it.seq)
			if it.counted {
				it.counted = false
				n++
			}
		}
		tr.finishSeqs(seqs)
		ctx.seqs = seqs
		ctx.done = rest
	}
	if n > 0 {
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
	defer func() { actx.Context = nil }()
	stopped := lctx.Done()
	var work []item
	for i := 0; ; {
		if i == len(work) {
			// The batch is done: its slice goes back as the lane's
			// queue (two slices take turns), sparing the appends of the
			// next batch their growing. Flushed first: actx.done points
			// into it.
			c.flushDone(actx)
			clear(work)
			spare := work[:0]
			if cap(spare) > maxSpareQueue {
				spare = nil
			}
			c.mu.Lock()
			if ks.dead.Load() || len(ks.queue) == 0 {
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
			work, ks.queue, i = ks.queue, spare, 0
			c.mu.Unlock()
		}
		if len(actx.done) >= 256 {
			c.flushDone(actx)
		}
		it := &work[i]
		i++
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
			// A new slice: actx.done may point into the old one.
			next := make([]item, 0, len(again)+len(work)-i)
			for _, h := range again {
				next = append(next, *h)
			}
			work, i = append(next, work[i:]...), 0
		}
	}
}

// maxSpareQueue bounds the queue memory (48 bytes an entry) an idle lane
// keeps.
const maxSpareQueue = 512

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
			ctx.done = append(ctx.done, it)
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
			ctx.done = append(ctx.done, it)
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
