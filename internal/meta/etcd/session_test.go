package etcd

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func missing(s meta.Store, key string) bool {
	_, err := s.Get(bg, key)
	return errors.Is(err, meta.ErrNotFound)
}

// TestSessionExpiry: a holder that stops renewing (here its store is closed,
// as when a broker dies) loses its keys once the TTL runs out, and its
// session reports Done.
func TestSessionExpiry(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := testConfig(srv, newPrefix())
	observer := openT(t, cfg)
	holder := open(t, cfg)
	sess, err := holder.NewSession(bg, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if sess.TTL() != 2*time.Second || sess.ID() == 0 { // rounded up to whole seconds
		t.Fatalf("session TTL %s, ID %x", sess.TTL(), sess.ID())
	}
	if err := meta.PutWithSession(bg, holder, sess, "brokers/1", []byte("host:9092")); err != nil {
		t.Fatal(err)
	}
	mustTxn(t, holder, nil, meta.Put("durable", nil))
	kv, err := observer.Get(bg, "brokers/1")
	if err != nil || string(kv.Value) != "host:9092" || kv.Version != 1 {
		t.Fatalf("observer Get = %+v, %v", kv, err)
	}
	// Renewals (every TTL/3) keep it alive well past its TTL.
	time.Sleep(2 * sess.TTL())
	if missing(observer, "brokers/1") || closed(sess.Done()) {
		t.Fatal("a renewed session expired")
	}

	holder.Close() // no revoke: the lease must run out by itself
	eventually(t, "the leased key to vanish", func() bool { return missing(observer, "brokers/1") })
	eventually(t, "Done", func() bool { return closed(sess.Done()) })
	if missing(observer, "durable") {
		t.Fatal("a key written without the session vanished with it")
	}
	if err := sess.Close(); err != nil {
		t.Fatalf("Close of an ended session: %v", err)
	}
}

// TestSessionClose: Close revokes, so the keys are gone when it returns.
func TestSessionClose(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	sess, err := s.NewSession(bg, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = s.TxnWithSession(bg, sess, []meta.Compare{{Key: "leader", Version: 0}},
		meta.Put("leader", []byte("1")), meta.Put("leader-info", nil), meta.Delete("old"),
		meta.PutDetached("fence", []byte("7")))
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	if !closed(sess.Done()) {
		t.Fatal("Done not closed after Close")
	}
	if !missing(s, "leader") || !missing(s, "leader-info") {
		t.Fatal("leased keys survive Close")
	}
	if kv, err := s.Get(bg, "fence"); err != nil || string(kv.Value) != "7" {
		t.Fatalf("a detached put of the session's Txn: %+v, %v; want it kept after Close", kv, err)
	}
	if err := sess.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := meta.PutWithSession(bg, s, sess, "k", nil); !errors.Is(err, meta.ErrSessionDone) {
		t.Fatalf("put with a closed session = %v, want ErrSessionDone", err)
	}
	if !missing(s, "k") {
		t.Fatal("put with a closed session wrote")
	}
}

// TestSessionRevokedElsewhere: the lease disappears behind the holder's back
// (an operator, or expiry during a long partition): Done closes and writes
// with it fail with ErrSessionDone, never silently unleased.
func TestSessionRevokedElsewhere(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	// The holder notices at its next renewal, TTL/3 later.
	sess, err := s.NewSession(bg, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := meta.PutWithSession(bg, s, sess, "k", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rawClient(t, srv).Revoke(bg, clientv3.LeaseID(sess.ID())); err != nil {
		t.Fatal(err)
	}
	if !missing(s, "k") {
		t.Fatal("key survives its revoked lease")
	}
	// Straight after the revoke Done may still be open; etcd then refuses.
	if err := meta.PutWithSession(bg, s, sess, "k2", nil); !errors.Is(err, meta.ErrSessionDone) {
		t.Fatalf("put with a revoked session = %v, want ErrSessionDone", err)
	}
	eventually(t, "Done after revoke", func() bool { return closed(sess.Done()) })
}

// TestRevokeSession: another client ends a session by its ID (a restarted
// broker ending its previous process's session); its keys go at once and
// revoking it again is not an error.
func TestRevokeSession(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := testConfig(srv, newPrefix())
	holder := open(t, cfg)
	other := openT(t, cfg)
	sess, err := holder.NewSession(bg, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.PutWithSession(bg, holder, sess, "brokers/1", nil); err != nil {
		t.Fatal(err)
	}
	holder.Close() // the previous process dies
	if err := other.RevokeSession(bg, sess.ID()); err != nil {
		t.Fatal(err)
	}
	if !missing(other, "brokers/1") {
		t.Fatal("the revoked session's key survives")
	}
	if err := other.RevokeSession(bg, sess.ID()); err != nil {
		t.Fatalf("revoking a revoked session: %v", err)
	}
}

// TestSessionElection: brokers race to claim a key guarded by "must not
// exist"; exactly one wins, and when the winner's session ends another can
// claim it.
func TestSessionElection(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	const n = 4
	sessions := make([]meta.Session, n)
	for i := range sessions {
		var err error
		if sessions[i], err = s.NewSession(bg, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		defer sessions[i].Close()
	}
	claim := func(i int) error {
		return s.TxnWithSession(bg, sessions[i], []meta.Compare{{Key: "leaders/t/0", Version: 0}},
			meta.Put("leaders/t/0", []byte(strconv.Itoa(i))))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = claim(i) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("both %d and %d won", winner, i)
			}
			winner = i
		case !errors.Is(err, meta.ErrConflict):
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody won")
	}
	if err := sessions[winner].Close(); err != nil {
		t.Fatal(err)
	}
	next := (winner + 1) % n
	if err := claim(next); err != nil {
		t.Fatalf("claim after the winner left: %v", err)
	}
	kv, err := s.Get(bg, "leaders/t/0")
	if err != nil || string(kv.Value) != strconv.Itoa(next) {
		t.Fatalf("leader = %q, %v; want %d", kv.Value, err, next)
	}
}

func TestSessionInvalid(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	if _, err := s.NewSession(bg, 0); err == nil {
		t.Fatal("NewSession(0) succeeded")
	}
	if err := s.TxnWithSession(bg, fakeSession{}, nil, meta.Put("k", nil)); !errors.Is(err, ErrInvalidTxn) {
		t.Fatalf("TxnWithSession with a foreign session = %v, want ErrInvalidTxn", err)
	}
}

type fakeSession struct{}

func (fakeSession) ID() int64             { return 1 }
func (fakeSession) TTL() time.Duration    { return time.Second }
func (fakeSession) Done() <-chan struct{} { return nil }
func (fakeSession) Close() error          { return nil }
func (fakeSession) ValidUntil() time.Time { return time.Time{} }

// TestSessionValidUntil: ValidUntil starts about a TTL ahead and moves
// forward with each renewal; it is never later than the renewal's send
// time plus the TTL.
func TestSessionValidUntil(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	before := time.Now()
	sess, err := s.NewSession(bg, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	first := sess.ValidUntil()
	if first.After(before.Add(sess.TTL())) || first.Before(before.Add(sess.TTL()/2)) {
		t.Fatalf("ValidUntil %v after the grant, want within (TTL/2, TTL] of %v", first.Sub(before), sess.TTL())
	}
	eventually(t, "a renewal to move ValidUntil", func() bool { return sess.ValidUntil().After(first) })
	if v := sess.ValidUntil(); v.After(time.Now().Add(sess.TTL())) {
		t.Fatalf("ValidUntil %v ahead of now, more than the TTL", time.Until(v))
	}
}

// TestSessionOutlivesEtcdRestart: etcd is down for longer than the TTL.
// ValidUntil passes, but the session does not end on that alone: an etcd
// restart extends every lease, so once etcd answers the lease is renewed,
// ValidUntil moves on, and the leased keys are still there.
func TestSessionOutlivesEtcdRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := testConfig(srv, newPrefix())
	cfg.RequestTimeout = time.Second
	s := openT(t, cfg)
	sess, err := s.NewSession(bg, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := meta.PutWithSession(bg, s, sess, "leader", nil); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	stopped := time.Now()
	eventually(t, "ValidUntil to pass", func() bool { return time.Now().After(sess.ValidUntil()) })
	time.Sleep(sess.TTL() - time.Since(stopped) + 500*time.Millisecond) // down longer than the TTL
	if closed(sess.Done()) {
		t.Fatal("the session ended while etcd was down")
	}
	srv.Start(t)
	eventually(t, "a renewal after the restart", func() bool { return time.Now().Before(sess.ValidUntil()) })
	if closed(sess.Done()) || missing(s, "leader") {
		t.Fatalf("after the restart: done %v, leased key missing %v", closed(sess.Done()), missing(s, "leader"))
	}
}

// TestSessionEndsAfterEtcdPause: etcd paused for longer than the TTL
// expires the lease when it runs again; the holder's next renewal learns
// that and Done closes.
func TestSessionEndsAfterEtcdPause(t *testing.T) {
	srv := etcdtest.StartProcess(t)
	cfg := testConfig(srv, newPrefix())
	cfg.RequestTimeout = time.Second
	s := openT(t, cfg)
	sess, err := s.NewSession(bg, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	srv.Pause(t)
	time.Sleep(sess.TTL() + time.Second)
	if closed(sess.Done()) {
		t.Fatal("the session ended while etcd was paused")
	}
	if time.Now().Before(sess.ValidUntil()) {
		t.Fatal("ValidUntil not passed after a pause longer than the TTL")
	}
	srv.Resume(t)
	eventually(t, "Done after the pause", func() bool { return closed(sess.Done()) })
}
