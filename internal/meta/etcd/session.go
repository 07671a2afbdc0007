package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-mq/sluice/internal/meta"
)

// session is a meta.Session on one etcd lease, renewed by its own loop
// (keepAlive) rather than the client's lessor, because the holder needs to
// know how long the lease is certainly still held: etcd renews a lease to
// TTL from when it handles the renewal, which is after the request left
// here, so send time + TTL is a lower bound of the lease's expiry in etcd,
// whatever the answer's delay. The client's lessor does not say when the
// request it answers was sent.
type session struct {
	s      *Store
	id     clientv3.LeaseID
	ttl    time.Duration
	cancel context.CancelFunc // stops the keepalive
	done   chan struct{}

	// base is the monotonic origin of valid: a process paused (SIGSTOP, a
	// VM stall) sees the time it missed when it wakes, so an expired
	// validity is seen before anything is served.
	base  time.Time
	valid atomic.Int64 // ns after base: ValidUntil

	renewals atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// validityMargin is taken off send time + TTL: the lease is acted on only
// until this long before the earliest moment etcd could expire it.
func validityMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// renewRetry is the pause between renewal attempts while etcd does not
// answer: short, so that the holder knows where it stands soon after etcd
// is back.
const renewRetry = 100 * time.Millisecond

// NewSession grants an etcd lease of ttl rounded up to whole seconds (etcd
// may raise it to its minimum, about 1.5 election timeouts) and renews it
// in the background every TTL/3. ctx bounds the grant only.
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
	base := time.Now()
	g, err := s.cli.Grant(rctx, secs)
	if err != nil {
		return nil, s.wrapErr(ctx, rctx, what, err)
	}
	// The keepalive lives as long as the session, not as the caller's ctx.
	kctx, kcancel := context.WithCancel(context.Background())
	ss := &session{
		s:      s,
		id:     g.ID,
		ttl:    time.Duration(g.TTL) * time.Second,
		cancel: kcancel,
		done:   make(chan struct{}),
		base:   base,
	}
	ss.valid.Store(int64(ss.ttl - validityMargin(ss.ttl)))
	go ss.keepAlive(kctx)
	return ss, nil
}

func (ss *session) ID() int64 { return int64(ss.id) }

// Renewals counts the renewals etcd acknowledged (for measuring what a
// lease TTL costs).
func (ss *session) Renewals() int64       { return ss.renewals.Load() }
func (ss *session) TTL() time.Duration    { return ss.ttl }
func (ss *session) Done() <-chan struct{} { return ss.done }

// ValidUntil is the send time of the last renewal etcd acknowledged plus
// the TTL, less validityMargin.
func (ss *session) ValidUntil() time.Time {
	return ss.base.Add(time.Duration(ss.valid.Load()))
}

// keepAlive renews the lease every TTL/3 until ctx ends (Close) or etcd
// says the lease is gone (expired, revoked), then closes done. While etcd
// does not answer it keeps trying every renewRetry, however long: only
// etcd can tell whether the lease outlived the outage (an etcd restart
// extends every lease; a pause of etcd longer than the TTL expires them),
// and a lease still held is worth keeping. ValidUntil says meanwhile what
// the holder may rely on.
func (ss *session) keepAlive(ctx context.Context) {
	defer close(ss.done)
	interval := ss.ttl / 3
	next := interval // the grant was a renewal
	for {
		t := time.NewTimer(next - time.Since(ss.base))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		sent := time.Since(ss.base)
		// A renewal that takes longer than the interval is late anyway:
		// give up on it and send another, so one request lost with a
		// broken connection cannot hold up the next.
		rctx, cancel := context.WithTimeout(ctx, interval)
		resp, err := ss.s.cli.KeepAliveOnce(rctx, ss.id)
		cancel()
		switch {
		case ctx.Err() != nil, ss.s.closed.Load():
			return
		case err == nil && resp.TTL > 0:
			ttl := min(time.Duration(resp.TTL)*time.Second, ss.ttl)
			ss.valid.Store(int64(sent + ttl - validityMargin(ss.ttl)))
			ss.renewals.Add(1)
			next = sent + interval
		case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
			return // expired or revoked: its keys are gone
		case retriable(err), status.Code(err) == codes.Internal:
			// As the client's own lessor: Unavailable and Internal
			// pass; a leader change, a lost connection.
			next = time.Since(ss.base) + renewRetry
		default:
			// etcd refuses the renewal for good (permissions, say): the
			// holder is better off starting a new session, whose errors
			// it reports.
			return
		}
	}
}

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

// RevokeSession revokes the lease of a session by its ID, whoever holds
// it: a broker restarted on the same data directory ends the session its
// previous process left, instead of waiting for it to expire. A lease
// already gone is not an error.
func (s *Store) RevokeSession(ctx context.Context, id int64) error {
	what := fmt.Sprintf("revoke session %x", id)
	if err := s.check(ctx, what); err != nil {
		return err
	}
	rctx, cancel := s.reqCtx(ctx)
	defer cancel()
	if _, err := s.cli.Revoke(rctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return s.wrapErr(ctx, rctx, what, err)
	}
	return nil
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
