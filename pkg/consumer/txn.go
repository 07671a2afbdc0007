package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ExactlyOnce: each transaction takes one poll's records, and the deferred
// records that fell due, runs them until every lane is idle, and commits
// the records it wrote (retry, park, hold, done, dead letters, Emit) with
// the group's offsets. The offset committed for a partition is its
// tracker's low mark, not the end of the poll: a retry partition keeps
// hold markers and held or deferred records unfinished across
// transactions. A retry-topic record finished above an unfinished one gets
// a done marker in the same transaction, so a restart that reads it again
// skips it (see settle, takeDone and install).
//
// A transaction that aborts (a rebalance, a failed produce, a stop) rewinds
// the client to the committed offsets, and every lane, tracker and park
// state is dropped and rebuilt from the retry partitions, as after a
// restart.

type deferredItem struct {
	ks  *keyState
	it  *item
	due time.Time
}

// deferUntil sets it aside until due. Its key stays held: later records of
// the key are parked or held behind it.
func (c *Consumer) deferUntil(ks *keyState, it *item, due time.Time) {
	id := it.retryInfo().Origin.ID()
	if len(ks.heads) == 0 {
		// Not written with a hold marker (parking was off for its
		// writer): hold the key in memory while it waits.
		ks.heads = append(ks.heads, head{id: id})
		c.noteHeld(ks)
	}
	c.mu.Lock()
	ks.waiting++
	c.deferred = append(c.deferred, deferredItem{ks: ks, it: it, due: due})
	c.mu.Unlock()
}

// nextDue is the earliest due time of the deferred records, if any.
func (c *Consumer) nextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, d := range c.deferred {
		if next.IsZero() || d.due.Before(next) {
			next = d.due
		}
	}
	return next, !next.IsZero()
}

// requeueDue puts the deferred records that are due at the front of their
// lanes, and reports how many.
func (c *Consumer) requeueDue(work context.Context) int {
	now := c.cfg.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	rest := c.deferred[:0]
	for _, d := range c.deferred {
		switch {
		case d.ks.dead.Load():
		case d.due.After(now):
			rest = append(rest, d)
		default:
			d.ks.waiting--
			d.it.deferred = true
			d.ks.front = append(d.ks.front, *d.it)
			if !d.ks.running {
				c.startLocked(work, d.ks)
			}
			n++
		}
	}
	clear(c.deferred[len(rest):])
	c.deferred = rest
	return n
}

// takeDone reports whether a done marker read by the scan names it, and
// forgets the name. Done markers are written with ExactlyOnce only, but
// any consumer of the convention skips what they name.
func (c *Consumer) takeDone(it *item) bool {
	k := tp{it.rec.Topic, it.rec.Partition}
	c.mu.Lock()
	defer c.mu.Unlock()
	offs := c.doneOffs[k]
	if !offs[it.rec.Offset] {
		return false
	}
	delete(offs, it.rec.Offset)
	if len(offs) == 0 {
		delete(c.doneOffs, k)
	}
	return true
}

// failTxn makes the running transaction abort and stops its lanes.
func (c *Consumer) failTxn() {
	c.abort.Store(true)
	c.mu.Lock()
	cancel := c.cancelTxn
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// commitMarks lowers each partition's offset in the transaction's offset
// commit to the lowest record not finished.
func (c *Consumer) commitMarks(req *kmsg.TxnOffsetCommitRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnMarks = map[*tracker]int64{}
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if tr := c.parts[tp{t.Topic, p.Partition}]; tr != nil {
				if m, ok := tr.low(); ok && m < p.Offset {
					p.Offset = m
				}
				c.txnMarks[tr] = p.Offset
			}
		}
	}
	return nil
}

// reset forgets every partition's state after an aborted transaction: the
// client is back at the committed offsets, and the park state is rebuilt
// from the retry partitions when their records come again.
func (c *Consumer) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ls := range c.keys {
		for _, ks := range ls.byKey {
			ks.dead.Store(true)
			c.noteHeld(ks)
		}
		if ls.null != nil {
			ls.null.dead.Store(true)
			c.noteHeld(ls.null)
		}
	}
	clear(c.keys)
	clear(c.parts)
	clear(c.scanned)
	clear(c.doneOffs)
	c.deferred = nil
	c.buffered.Store(0)
}

// runTransactional runs one transaction per poll (or per batch of deferred
// records falling due).
func (c *Consumer) runTransactional(ctx, work context.Context) error {
	swept := time.Now()
	for {
		if time.Since(swept) >= c.cfg.commitInterval {
			c.mu.Lock()
			c.sweepLocked()
			c.mu.Unlock()
			swept = time.Now()
		}
		pollCtx, cancelPoll := ctx, context.CancelFunc(func() {})
		if due, ok := c.nextDue(); ok {
			pollCtx, cancelPoll = context.WithDeadline(ctx, due)
		}
		fs := c.sess.PollRecords(pollCtx, c.cfg.maxBuffered)
		cancelPoll()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fs.IsClientClosed() {
			return errors.New("consumer: client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				c.cfg.logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if due, ok := c.nextDue(); fs.NumRecords() == 0 && (!ok || due.After(c.cfg.clock.Now())) {
			continue
		}
		if err := c.sess.Begin(); err != nil {
			return fmt.Errorf("consumer: begin transaction: %w", err)
		}
		txn, cancel := context.WithCancel(work)
		c.abort.Store(false)
		c.mu.Lock()
		c.cancelTxn = cancel
		c.mu.Unlock()
		fs.EachPartition(func(fp kgo.FetchTopicPartition) { c.dispatch(txn, fp) })
		c.requeueDue(txn)
		c.wg.Wait() // every lane goroutine exits once its queue is empty
		try := kgo.TryCommit
		if ctx.Err() != nil || c.buffered.Load() != 0 || c.abort.Load() {
			try = kgo.TryAbort
		}
		// End even when stopping: an abort left open would hold the
		// partitions' readers back until the transaction times out.
		endCtx, endCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		committed, err := c.sess.End(kgo.PreTxnCommitFnContext(endCtx, c.commitMarks), try)
		endCancel()
		cancel()
		c.mu.Lock()
		c.cancelTxn = nil
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("consumer: end transaction: %w", err)
		}
		c.mu.Lock()
		marks := c.txnMarks
		c.txnMarks = nil
		c.mu.Unlock()
		if !committed {
			c.cfg.logger.Info("transaction aborted; records since the last commit will be handled again")
			c.reset()
			continue
		}
		for tr, m := range marks {
			tr.committedAt(m)
		}
	}
}
