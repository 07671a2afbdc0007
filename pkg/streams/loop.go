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
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("streams: beginning a transaction: %w", err)
		}
		perr := a.pollFor(ctx, sess.PollFetches)
		a.mu.Lock()
		a.flushAll()
		a.mu.Unlock()
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
		// Flush first so that a failed produce is seen here and aborts.
		ferr := sess.Client().Flush(endCtx)
		a.mu.Lock()
		serr := a.sendErr()
		a.mu.Unlock()
		how := kgo.TryCommit
		if perr != nil || ferr != nil || serr != nil {
			how = kgo.TryAbort
		}
		committed, err := sess.End(endCtx, how)
		cancel()
		a.mu.Lock()
		if committed {
			err = a.finish(true)
		} else {
			a.finish(false)
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
