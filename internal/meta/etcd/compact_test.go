package etcd

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

// compacted reports whether etcd's history no longer holds rev.
func compacted(t *testing.T, cli *clientv3.Client, rev int64) bool {
	t.Helper()
	_, err := cli.Get(context.Background(), "any", clientv3.WithRev(rev))
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatal(err)
	}
	return err != nil
}

// TestCompactionRounds: two brokers take rounds on one clock. A round's
// winner compacts to the revision it saw a round before, so one
// interval of history always stays; the other broker of the same round
// compacts nothing.
func TestCompactionRounds(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := rawClient(t, srv)
	prefix := newPrefix()
	a, b := openT(t, testConfig(srv, prefix)), openT(t, testConfig(srv, prefix))
	write := func() int64 {
		t.Helper()
		mustTxn(t, a, nil, meta.Put("k", []byte("v")))
		resp, err := cli.Get(context.Background(), "any")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}

	old := write()
	ra, got, err := a.compactOnce(bg, compactRound{})
	if err != nil || got != 0 {
		t.Fatalf("first round: compacted to %d, %v; want nothing, no revision of a round ago yet", got, err)
	}
	rb, got, err := b.compactOnce(bg, compactRound{})
	if err != nil || got != 0 {
		t.Fatalf("b in a's round: compacted to %d, %v; want nothing", got, err)
	}
	seen := ra.rev // what the next round's winner compacts to
	after := write()
	if compacted(t, cli, old) {
		t.Fatal("history compacted in the first round")
	}

	// Round two: b is first this time, with a's clock learned above.
	rb, got, err = b.compactOnce(bg, rb)
	if err != nil || got == 0 {
		t.Fatalf("b's round: compacted to %d, %v; want the revision it saw a round ago", got, err)
	}
	if got > seen || got < old {
		t.Fatalf("b compacted to %d; want a revision between %d and %d (one round back)", got, old, seen)
	}
	if !compacted(t, cli, old) {
		t.Fatalf("revision %d still in history after compacting to %d", old, got)
	}
	if compacted(t, cli, after) {
		t.Fatalf("revision %d, written after the round b compacted to, is gone", after)
	}
	if _, got, err := a.compactOnce(bg, ra); err != nil || got != 0 {
		t.Fatalf("a in b's round: compacted to %d, %v; want nothing", got, err)
	}
	// The store still reads and writes.
	mustTxn(t, a, nil, meta.Put("k", []byte("w")))
	if kv, err := b.Get(bg, "k"); err != nil || string(kv.Value) != "w" {
		t.Fatalf("Get after compaction: %q, %v", kv.Value, err)
	}
}

// TestCompactLoop: the background loop compacts on its own.
func TestCompactLoop(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := rawClient(t, srv)
	s := openT(t, testConfig(srv, newPrefix()))
	mustTxn(t, s, nil, meta.Put("k", nil))
	resp, err := cli.Get(context.Background(), "any")
	if err != nil {
		t.Fatal(err)
	}
	old := resp.Header.Revision
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Compact(ctx, 20*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	defer func() { cancel(); <-done }()
	eventually(t, "compaction of the first revisions", func() bool { return compacted(t, cli, old) })
}
