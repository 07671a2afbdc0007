package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/internal/meta"
)

// session is a meta.Session on one etcd lease. The client's lessor renews it
// (every TTL/3) until Close, Store.Close, or the lease is gone; the
// keepalive channel then closes, and with it done.
type session struct {
	s      *Store
	id     clientv3.LeaseID
	ttl    time.Duration
	cancel context.CancelFunc // stops the keepalive
	done   chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// NewSession grants an etcd lease of ttl rounded up to whole seconds (etcd
// may raise it to its minimum, about 1.5 election timeouts) and keeps it
// alive in the background. ctx bounds the grant only.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (meta.Session, error) {
	const what = "new session"
	if err := s.check(ctx, what); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("meta/etcd: %s: ttl %s is not positive", what, ttl)
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	g, err := s.cli.Grant(rctx, secs)
	if err != nil {
		return nil, s.wrapErr(ctx, rctx, what, err)
	}
	// The keepalive lives as long as the session, not as the caller's ctx.
	kctx, kcancel := context.WithCancel(context.Background())
	ch, err := s.cli.KeepAlive(kctx, g.ID)
	if err != nil {
		kcancel()
		s.cli.Revoke(rctx, g.ID) // best effort; it expires anyway
		return nil, s.wrapErr(ctx, rctx, what, err)
	}
	ss := &session{
		s:      s,
		id:     g.ID,
		ttl:    time.Duration(g.TTL) * time.Second,
		cancel: kcancel,
		done:   make(chan struct{}),
	}
	go func() {
		for range ch { // renewals; the channel closes when the lease is lost
		}
		close(ss.done)
	}()
	return ss, nil
}

func (ss *session) ID() int64             { return int64(ss.id) }
func (ss *session) TTL() time.Duration    { return ss.ttl }
func (ss *session) Done() <-chan struct{} { return ss.done }

// Close stops renewing and revokes the lease, deleting its keys at once. If
// etcd cannot be reached the keys still go, TTL later; Close then returns a
// meta.ErrUnavailable error.
func (ss *session) Close() error {
	ss.closeOnce.Do(func() {
		ss.cancel()
		if !ss.s.closed.Load() {
			ctx, cancel := ss.s.reqCtx(context.Background())
			_, err := ss.s.cli.Revoke(ctx, ss.id)
			if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				ss.closeErr = ss.s.wrapErr(context.Background(), ctx, fmt.Sprintf("close session %x", ss.id), err)
			}
			cancel()
		}
		<-ss.done
	})
	return ss.closeErr
}

// TxnWithSession is Txn with every put attached to sess's lease.
func (s *Store) TxnWithSession(ctx context.Context, sess meta.Session, cmps []meta.Compare, ops ...meta.Op) error {
	ss, ok := sess.(*session)
	if !ok {
		return fmt.Errorf("%w: session %T was not made by meta/etcd", ErrInvalidTxn, sess)
	}
	what := fmt.Sprintf("txn with session %x", ss.id)
	select {
	case <-ss.done:
		return fmt.Errorf("meta/etcd: %s: %w", what, meta.ErrSessionDone)
	default:
	}
	return s.txn(ctx, what, ss.id, cmps, ops)
}
