package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

func next(t *testing.T, ch <-chan meta.WatchEvent) meta.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event within 20s")
	}
	panic("unreachable")
}

func describe(ev meta.WatchEvent) string {
	if ev.Err != nil {
		return "err:" + ev.Err.Error()
	}
	kind := map[meta.WatchKind]string{meta.WatchPut: "put", meta.WatchDelete: "del"}[ev.Kind]
	return fmt.Sprintf("%s %s=%q v%d", kind, ev.Key, ev.Value, ev.Version)
}

func TestWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	other := openT(t, testConfig(srv, newPrefix()))
	mustTxn(t, s, nil, meta.Put("b/1", []byte("x")), meta.Put("b/2", []byte("y")), meta.Put("c", nil))

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	snap, rev, ch, err := s.Watch(ctx, "b/")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != 2 || snap[0].Key != "b/1" || snap[1].Key != "b/2" || string(snap[1].Value) != "y" || rev == 0 {
		t.Fatalf("snapshot %+v at %d", snap, rev)
	}

	mustTxn(t, s, nil, meta.Put("b/1", []byte("x2")))
	mustTxn(t, s, nil, meta.Put("c", nil), meta.Put("bb", nil)) // outside the prefix
	mustTxn(t, other, nil, meta.Put("b/1", []byte("other namespace")))
	mustTxn(t, s, nil, meta.Delete("b/2"), meta.Put("b/3", []byte("z")))
	mustTxn(t, s, nil, meta.DeletePrefix("b/"))

	want := []string{
		`put b/1="x2" v2`,
		`del b/2="" v0`,
		`put b/3="z" v1`,
		`del b/1="" v0`,
		`del b/3="" v0`,
	}
	last := rev
	var revs []int64
	for i, w := range want {
		ev := next(t, ch)
		if got := describe(ev); got != w {
			t.Fatalf("event %d = %s, want %s", i, got, w)
		}
		if ev.Revision < last || (ev.Revision == last && i == 0) {
			t.Fatalf("event %d at revision %d after %d", i, ev.Revision, last)
		}
		last = ev.Revision
		revs = append(revs, ev.Revision)
	}
	// One Txn, one revision.
	if revs[1] != revs[2] || revs[3] != revs[4] || revs[0] == revs[1] {
		t.Fatalf("revisions %v, want events of one Txn to share one", revs)
	}

	cancel()
	for ev := range ch { // drains and ends without an error event
		if ev.Err != nil {
			t.Fatalf("error event after cancel: %v", ev.Err)
		}
	}
}

// TestWatchNoGap: writes racing with Watch's start land in the snapshot or
// in the events, never in neither or both.
func TestWatchNoGap(t *testing.T) {
	srv := etcdtest.Start(t)
	s := openT(t, testConfig(srv, newPrefix()))
	const n = 200
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := s.Txn(bg, nil, meta.Put(fmt.Sprintf("k/%03d", i), nil)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	time.Sleep(5 * time.Millisecond) // let some writes go first; any split is valid
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	snap, _, ch, err := s.Watch(ctx, "k/")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, kv := range snap {
		seen[kv.Key]++
	}
	for len(seen) < n {
		ev := next(t, ch)
		if ev.Err != nil || ev.Kind != meta.WatchPut {
			t.Fatalf("event %s", describe(ev))
		}
		seen[ev.Key]++
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%s seen %d times", k, c)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWatchEndsOnClose: closing the store ends the watch with an error event
// rather than leaving the reader waiting forever.
func TestWatchEndsOnClose(t *testing.T) {
	srv := etcdtest.Start(t)
	s := open(t, testConfig(srv, newPrefix()))
	_, _, ch, err := s.Watch(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ev := next(t, ch)
	if !errors.Is(ev.Err, ErrClosed) {
		t.Fatalf("event %s, want ErrClosed", describe(ev))
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel open after the error event")
	}
}
