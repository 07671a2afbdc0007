package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

// TestEtcdRestart stops the real etcd under a connected store: every call
// fails with a retriable error (never ErrConflict or ErrNotFound), and once
// etcd is back on the same data directory the same store works again with
// its data intact, without being reopened.
func TestEtcdRestart(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := testConfig(srv, newPrefix())
	cfg.RequestTimeout = 300 * time.Millisecond
	s := openT(t, cfg)
	mustTxn(t, s, nil, meta.Put("k", []byte("v1")))
	mustTxn(t, s, []meta.Compare{{Key: "k", Version: 1}}, meta.Put("k", []byte("v2")))

	wctx, wcancel := context.WithCancel(bg)
	defer wcancel()
	_, _, watch, err := s.Watch(wctx, "w/")
	if err != nil {
		t.Fatal(err)
	}

	// Stopping waits up to etcd's request timeout (about 5 s) for the open
	// watch stream, then cuts it, as a real etcd shutdown does.
	srv.Stop()

	retriable := func(what string, err error) {
		t.Helper()
		if !meta.IsRetriable(err) || errors.Is(err, meta.ErrConflict) || errors.Is(err, meta.ErrNotFound) {
			t.Errorf("%s with etcd down = %v, want a retriable error", what, err)
		}
	}
	_, err = s.Get(bg, "k")
	retriable("Get", err)
	_, err = s.List(bg, "")
	retriable("List", err)
	retriable("Txn", s.Txn(bg, []meta.Compare{{Key: "k", Version: 2}}, meta.Put("k", []byte("v3"))))
	_, err = s.NewSession(bg, time.Second)
	retriable("NewSession", err)
	_, _, _, err = s.Watch(bg, "")
	retriable("Watch", err)
	// The caller's own deadline stays the caller's: not dressed up as
	// ErrUnavailable.
	short, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	_, err = s.Get(short, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || meta.IsRetriable(err) {
		t.Errorf("Get with an expiring caller context = %v, want context.DeadlineExceeded", err)
	}
	// A new store cannot connect either, and says why.
	dial := cfg
	dial.DialTimeout = 300 * time.Millisecond
	if _, err := New(bg, dial); !meta.IsRetriable(err) {
		t.Errorf("New with etcd down = %v, want a retriable error", err)
	}

	srv.Start(t)

	eventually(t, "Get after restart", func() bool {
		_, err := s.Get(bg, "k")
		return err == nil
	})
	kv, err := s.Get(bg, "k")
	if err != nil || string(kv.Value) != "v2" || kv.Version != 2 {
		t.Fatalf("after restart Get = %+v, %v; want v2 at version 2", kv, err)
	}
	// The Txn that failed while etcd was down was never applied (it could
	// not have reached etcd), so its compare still holds.
	mustTxn(t, s, []meta.Compare{{Key: "k", Version: 2}}, meta.Put("k", []byte("v3")))

	// The watch either resumed transparently or ended with a retriable
	// error; either way a watcher can carry on.
	mustTxn(t, s, nil, meta.Put("w/1", []byte("after")))
	ev := next(t, watch)
	switch {
	case ev.Err != nil:
		if !meta.IsRetriable(ev.Err) {
			t.Fatalf("watch ended with %v, want a retriable error", ev.Err)
		}
		snap, _, _, err := s.Watch(wctx, "w/")
		if err != nil || len(snap) != 1 || string(snap[0].Value) != "after" {
			t.Fatalf("re-Watch = %+v, %v", snap, err)
		}
	case ev.Key != "w/1" || string(ev.Value) != "after":
		t.Fatalf("watch event after restart: %s", describe(ev))
	}

	// Sessions work again.
	sess, err := s.NewSession(bg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.PutWithSession(bg, s, sess, "lease", nil); err != nil {
		t.Fatal(err)
	}
	sess.Close()
}
