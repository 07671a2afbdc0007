package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// endTimeout bounds a commit at shutdown, when ctx is already done.
const endTimeout = 30 * time.Second

// runExactlyOnce runs one transaction per commit interval: records
// processed, then changelog records, then the offsets, committed together
// by the session. When it does not commit (a rebalance, a fenced
// producer), the overlays are dropped and the session rewinds to the
// committed offsets.
func (a *App) runExactlyOnce(ctx context.Context, opts []kgo.Opt) error {
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("streams: %w", err)
	}
	defer sess.Close()
	a.prod = sess
	for {
		a.mu.Lock()
		a.firstInTxn = map[string]map[int32]int64{}
		a.polledInTxn = 0
		a.mu.Unlock()
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("streams: beginning a transaction: %w", err)
		}
		began := time.Now()
		perr := a.pollFor(ctx, sess.PollFetches)
		polled := time.Now()
		a.mu.Lock()
		a.flushAll()
		a.mu.Unlock()
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
		// Flush first so that a failed produce is seen here and aborts.
		ferr := sess.Client().Flush(endCtx)
		a.mu.Lock()
		serr := a.sendErr()
		empty := a.polledInTxn == 0
		a.mu.Unlock()
		how := kgo.TryCommit
		if perr != nil || ferr != nil || serr != nil || empty {
			// An empty transaction has nothing to commit, and ending it
			// with a commit costs: franz-go, seeing no TxnOffsetCommit
			// (so no KIP-447 answer), holds its rebalance lock for 500ms
			// after it, which the next End waits out. Idle, an instance
			// then went through transactions of 600ms and picked up a
			// new record that much later. Aborting one sends nothing.
			how = kgo.TryAbort
		}
		committed, err := sess.End(endCtx, how)
		cancel()
		a.log.Debug("transaction ended", "committed", committed, "empty", empty, "processing", polled.Sub(began), "ending", time.Since(polled))
		a.mu.Lock()
		if committed {
			err = a.finish(true)
		} else {
			// Also an empty transaction: nothing to drop, nothing to rewind.
			a.finish(false)
			a.rewindUncommitted(sess.Client())
		}
		a.mu.Unlock()
		switch {
		case perr != nil:
			return perr
		case serr != nil:
			return serr
		case err != nil:
			return fmt.Errorf("streams: ending a transaction: %w", err)
		case ctx.Err() != nil:
			return nil
		}
	}
}

// pollFor polls and processes until the commit interval has passed or ctx
// is done.
func (a *App) pollFor(ctx context.Context, poll func(context.Context) kgo.Fetches) error {
	deadline := time.Now().Add(a.cfg.commitInterval)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := poll(pctx)
		cancel()
		if err := a.process(ctx, fs); err != nil {
			return err
		}
	}
	return nil
}

func (a *App) runAtLeastOnce(ctx context.Context, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("streams: %w", err)
	}
	defer cl.Close()
	a.prod = cl
	for {
		perr := a.pollFor(ctx, cl.PollFetches)
		if perr == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
			perr = a.commitAtLeastOnce(cctx, cl)
			cancel()
		}
		cl.AllowRebalance()
		if perr != nil {
			return perr
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// commitAtLeastOnce writes changelogs and outputs, waits for them, writes
// the stores through, then commits the offsets of every polled record.
func (a *App) commitAtLeastOnce(ctx context.Context, cl *kgo.Client) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flushAll()
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("streams: flushing: %w", err)
	}
	if err := a.sendErr(); err != nil {
		a.finish(false)
		return err
	}
	if err := a.finish(true); err != nil {
		return err
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("streams: committing offsets: %w", err)
	}
	return nil
}

// rewindUncommitted sets partitions that were read in an aborted
// transaction and have no committed offset back to the first record read.
// The session rewinds partitions to their committed offsets itself but
// leaves partitions without one where they are, which would skip the
// aborted records. a.mu is held.
func (a *App) rewindUncommitted(cl *kgo.Client) {
	committed := cl.CommittedOffsets()
	set := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range a.firstInTxn {
		for p, first := range ps {
			if _, ok := committed[topic][p]; ok {
				continue
			}
			if set[topic] == nil {
				set[topic] = map[int32]kgo.EpochOffset{}
			}
			set[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: first}
		}
	}
	if len(set) > 0 {
		a.log.Info("rewinding partitions without a committed offset after an abort", "partitions", set)
		cl.SetOffsets(set)
	}
}
