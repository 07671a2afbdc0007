package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNotHandling is returned by Emit called with a context that is not a
// handler's.
var ErrNotHandling = errors.New("consumer: Emit outside a handler")

type emitKey struct{}

// Emit queues r to be produced when the running handler returns nil; the
// records of a run that fails are dropped. With ExactlyOnce they are
// produced in the transaction that commits the handled record's offset, so
// a read_committed reader sees them exactly once; otherwise they are
// acknowledged before the record counts as finished (at least once). An
// error producing them fails the run, which is then retried as any other
// failure. Call Emit from the handler's goroutine, with its context.
func Emit(ctx context.Context, r *kgo.Record) error {
	a, ok := ctx.Value(emitKey{}).(*attemptCtx)
	if !ok {
		return ErrNotHandling
	}
	a.emits = append(a.emits, r)
	return nil
}

// emit produces the run's emitted records and waits for them.
func (c *Consumer) emit(ctx *attemptCtx) error {
	var err error
	run := ctx.Context // not the reused attemptCtx: the client may keep it (see send)
	if c.sess != nil {
		err = c.sess.ProduceSync(run, ctx.emits...).FirstErr()
	} else {
		err = c.cl.ProduceSync(run, ctx.emits...).FirstErr()
	}
	clear(ctx.emits)
	ctx.emits = ctx.emits[:0]
	if err != nil {
		if c.sess != nil && ctx.Err() == nil {
			c.failTxn()
		}
		return fmt.Errorf("emit: %w", err)
	}
	return nil
}
