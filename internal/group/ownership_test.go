package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/objstore/localfs"
)

// engineStore opens a real single-node log engine in the test's directory
// and returns the offsets topic over it.
func newEngineStore(t *testing.T) Store {
	t.Helper()
	dir := t.TempDir()
	st, err := localfs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := embedded.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.Open(context.Background(), log.DefaultConfig(filepath.Join(dir, "wal")), st, md, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		md.Close()
		st.Close()
	})
	// The topic the tests commit offsets for exists, as the Kafka
	// handlers require: offsets of missing topics are swept on load.
	if _, err := e.CreateTopic(context.Background(), "t", 1, nil); err != nil {
		t.Fatal(err)
	}
	return NewEngineStore(e)
}

// newOwned starts a coordinator with explicit ownership over store; the
// offsets topic exists with 4 partitions and none is owned.
func newOwned(t *testing.T, store Store) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OffsetsTopicPartitions = 4
	cfg.InitialRebalanceDelay = 0
	cfg.ExplicitOwnership = true
	c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(c.Close)
	if !c.Loaded() {
		t.Fatal("an explicit-ownership coordinator has nothing to load as a whole")
	}
	if _, err := c.FetchOffsets("g", nil); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch before the topic exists: %v", err)
	}
	if err := c.EnsureTopic(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// groupsIn returns n group ids that map to partition p of 4.
func groupsIn(p int32, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if id := fmt.Sprintf("g%d", i); partitionFor(id, 4) == p {
			out = append(out, id)
		}
	}
	return out
}

func commitOne(t *testing.T, c *Coordinator, group string, offset int64) error {
	t.Helper()
	errs := <-c.Commit(context.Background(), CommitRequest{Group: group, Generation: -1, RetentionMs: -1, Version: 8,
		Partitions: []CommitPartition{{Topic: "t", Partition: 0, Offset: offset, LeaderEpoch: -1}}})
	return errs[0]
}

func fetchOne(c *Coordinator, group string) (int64, error) {
	got, err := c.FetchOffsets(group, []TopicPartitions{{Topic: "t", Partitions: []int32{0}}})
	if err != nil {
		return 0, err
	}
	return got[0].Offset, nil
}

func join(c *Coordinator, group, member string) <-chan JoinResult {
	return c.Join(context.Background(), JoinRequest{Group: group, MemberID: member, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range", Metadata: []byte("m")}}, SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 30 * time.Second, ClientID: "c", ClientHost: "/127.0.0.1"})
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
	panic("unreachable")
}

// TestOwnership: with explicit ownership a group is served only while its
// partition is owned; disowning answers the waiting join NOT_COORDINATOR,
// and owning the partition again replays its offsets and metadata from the
// log. Run over the memory store and the real log engine.
func TestOwnership(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) Store
	}{
		{"memory", func(*testing.T) Store { return &memStore{} }},
		{"engine", newEngineStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newOwned(t, tc.store(t))
			ga, gb := groupsIn(1, 1)[0], groupsIn(2, 1)[0]
			if err := commitOne(t, c, ga, 5); !errors.Is(err, ErrNotCoordinator) {
				t.Fatalf("commit to an unowned partition: %v", err)
			}
			for _, p := range []int32{1, 2} {
				if err := c.OwnPartition(ctx, p, 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.OwnPartition(ctx, 1, 1); err != nil {
				t.Fatalf("owning again at the same epoch: %v", err)
			}
			if err := commitOne(t, c, ga, 5); err != nil {
				t.Fatal(err)
			}
			if err := commitOne(t, c, gb, 7); err != nil {
				t.Fatal(err)
			}

			// A stable member in ga, then a second join left waiting for
			// the first member to rejoin.
			a := recv(t, join(c, ga, ""), "join of a")
			if a.Err != nil {
				t.Fatal(a.Err)
			}
			s := recv(t, c.Sync(SyncRequest{Group: ga, MemberID: a.MemberID, Generation: a.Generation,
				Assignments: map[string][]byte{a.MemberID: []byte("all")}}), "sync of a")
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			pending := join(c, ga, "")
			select {
			case r := <-pending:
				t.Fatalf("second join answered before the rebalance: %+v", r)
			case <-time.After(50 * time.Millisecond):
			}

			c.DisownPartition(1)
			if r := recv(t, pending, "waiting join"); !errors.Is(r.Err, ErrNotCoordinator) {
				t.Fatalf("waiting join after disown: %+v", r)
			}
			if _, err := fetchOne(c, ga); !errors.Is(err, ErrNotCoordinator) {
				t.Fatalf("fetch from a disowned partition: %v", err)
			}
			if err := c.Heartbeat(ga, a.MemberID, nil, a.Generation); !errors.Is(err, ErrNotCoordinator) {
				t.Fatalf("heartbeat in a disowned partition: %v", err)
			}
			if err := commitOne(t, c, ga, 6); !errors.Is(err, ErrNotCoordinator) {
				t.Fatalf("commit to a disowned partition: %v", err)
			}
			if d := c.Describe([]string{ga}); !errors.Is(d[0].Err, ErrNotCoordinator) {
				t.Fatalf("describe in a disowned partition: %+v", d)
			}
			if l, err := c.List(); err != nil || len(l) != 1 || l[0].Group != gb {
				t.Fatalf("list serves only owned partitions: %+v %v", l, err)
			}
			if o, err := fetchOne(c, gb); err != nil || o != 7 {
				t.Fatalf("the other partition is still served: %d %v", o, err)
			}
			if err := c.CompleteTxn(ctx, 1, 99, true); err != nil {
				t.Fatalf("completing a transaction in a disowned partition: %v", err)
			}

			if err := c.OwnPartition(ctx, 1, 2); err != nil {
				t.Fatal(err)
			}
			if o, err := fetchOne(c, ga); err != nil || o != 5 {
				t.Fatalf("offset after owning again: %d %v", o, err)
			}
			d := c.Describe([]string{ga})[0]
			if d.Err != nil || d.State != Stable.String() || len(d.Members) != 1 || d.Members[0].MemberID != a.MemberID {
				t.Fatalf("group after owning again: %+v", d)
			}
			if err := c.Heartbeat(ga, a.MemberID, nil, a.Generation); err != nil {
				t.Fatalf("heartbeat of the replayed member: %v", err)
			}
		})
	}
}

// TestOwnershipExpiry: offset expiry only looks at owned partitions.
func TestOwnershipExpiry(t *testing.T) {
	ctx := context.Background()
	c := newOwned(t, &memStore{})
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return now }
	g := groupsIn(3, 1)[0]
	if err := c.OwnPartition(ctx, 3, 1); err != nil {
		t.Fatal(err)
	}
	if err := commitOne(t, c, g, 5); err != nil {
		t.Fatal(err)
	}
	c.DisownPartition(3)
	now = now.Add(c.cfg.OffsetsRetention + time.Hour)
	c.ExpireOffsets()
	if err := c.OwnPartition(ctx, 3, 2); err != nil {
		t.Fatal(err)
	}
	if o, err := fetchOne(c, g); err != nil || o != 5 {
		t.Fatalf("offset expired while its partition was not owned: %d %v", o, err)
	}
	c.ExpireOffsets()
	if o, err := fetchOne(c, g); err != nil || o != -1 {
		t.Fatalf("offset not expired once owned: %d %v", o, err)
	}
}

// TestOwnershipNotLeader: an append the log refuses because this broker no
// longer leads the partition is NOT_COORDINATOR, not a storage error.
func TestOwnershipNotLeader(t *testing.T) {
	store := &memStore{}
	c := newOwned(t, store)
	g := groupsIn(0, 1)[0]
	if err := c.OwnPartition(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.fail = fmt.Errorf("%w: __consumer_offsets-0", log.ErrNotLeader)
	store.mu.Unlock()
	if err := commitOne(t, c, g, 5); !errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrStore) {
		t.Fatalf("commit refused by the log: %v", err)
	}
	errs := <-c.TxnCommit(context.Background(), TxnCommitRequest{Group: g, PID: 1, Generation: -1,
		Partitions: []CommitPartition{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}})
	if !errors.Is(errs[0], ErrNotCoordinator) {
		t.Fatalf("transactional commit refused by the log: %v", errs[0])
	}
}

// gatedStore holds reads of the offsets topic until open is closed.
type gatedStore struct {
	*memStore
	open chan struct{}
}

func (s *gatedStore) Read(ctx context.Context, p int32, offset int64) ([]byte, int64, error) {
	select {
	case <-s.open:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return s.memStore.Read(ctx, p, offset)
}

// TestOwnershipLoading: requests for a partition being loaded answer
// COORDINATOR_LOAD_IN_PROGRESS; disowning it mid-load ends the load.
func TestOwnershipLoading(t *testing.T) {
	ctx := context.Background()
	store := &gatedStore{memStore: &memStore{}, open: make(chan struct{})}
	c := newOwned(t, store)
	g := groupsIn(2, 1)[0]

	done := make(chan error, 1)
	go func() { done <- c.OwnPartition(ctx, 2, 1) }()
	waitFor(t, func() bool { _, err := fetchOne(c, g); return errors.Is(err, ErrLoading) })
	if _, err := c.List(); !errors.Is(err, ErrLoading) {
		t.Fatalf("list while a partition loads: %v", err)
	}
	c.DisownPartition(2)
	if err := recv(t, done, "OwnPartition"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("load of a partition disowned mid-load: %v", err)
	}
	if _, err := fetchOne(c, g); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch after the aborted load: %v", err)
	}

	go func() { done <- c.OwnPartition(ctx, 2, 2) }()
	waitFor(t, func() bool { _, err := fetchOne(c, g); return errors.Is(err, ErrLoading) })
	close(store.open)
	if err := recv(t, done, "OwnPartition"); err != nil {
		t.Fatal(err)
	}
	if o, err := fetchOne(c, g); err != nil || o != -1 {
		t.Fatalf("fetch once loaded: %d %v", o, err)
	}

	// A caller's context ending stops a load too; the partition stays
	// unowned.
	cctx, cancel := context.WithCancel(ctx)
	store.open = make(chan struct{})
	go func() { done <- c.OwnPartition(cctx, 1, 1) }()
	g1 := groupsIn(1, 1)[0]
	waitFor(t, func() bool { _, err := fetchOne(c, g1); return errors.Is(err, ErrLoading) })
	cancel()
	if err := recv(t, done, "OwnPartition"); !errors.Is(err, context.Canceled) {
		t.Fatalf("load with a canceled context: %v", err)
	}
	if _, err := fetchOne(c, g1); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch after a canceled load: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOwnershipClaimed: while this broker holds a partition's leadership
// but has not started to own it (cluster mode: the partition's log is still
// loading), its groups answer ErrLoading (COORDINATOR_LOAD_IN_PROGRESS), as
// Kafka does, not ErrNotCoordinator; once it is neither owned nor claimed,
// ErrNotCoordinator again.
func TestOwnershipClaimed(t *testing.T) {
	c := newOwned(t, &memStore{})
	var claimed atomic.Int32
	claimed.Store(-1)
	c.cfg.Claimed = func(p int32) bool { return p == claimed.Load() }
	g, other := groupsIn(2, 1)[0], groupsIn(1, 1)[0]
	if _, err := fetchOne(c, g); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch, nothing owned or claimed: %v", err)
	}
	claimed.Store(2)
	if _, err := fetchOne(c, g); !errors.Is(err, ErrLoading) {
		t.Fatalf("fetch, partition claimed before any is owned: %v", err)
	}
	if err := c.OwnPartition(context.Background(), 2, 1); err != nil {
		t.Fatal(err)
	}
	if o, err := fetchOne(c, g); err != nil || o != -1 {
		t.Fatalf("fetch once owned: %d %v", o, err)
	}
	claimed.Store(1)
	if _, err := fetchOne(c, other); !errors.Is(err, ErrLoading) {
		t.Fatalf("fetch, partition claimed while another is owned: %v", err)
	}
	claimed.Store(-1)
	c.DisownPartition(2)
	for _, id := range []string{g, other} {
		if _, err := fetchOne(c, id); !errors.Is(err, ErrNotCoordinator) {
			t.Fatalf("fetch %s, neither owned nor claimed: %v", id, err)
		}
	}
}

// TestPipelinedCommitsLandInOrder: commits issued one after another without
// waiting (a client pipelining async OffsetCommits on one connection, as
// librdkafka's 0030 test does) take effect in the order they were issued:
// the last one is what is committed, and what a reload from the log finds.
func TestPipelinedCommitsLandInOrder(t *testing.T) {
	ctx := context.Background()
	store := newEngineStore(t)
	c := newOwned(t, store)
	g := groupsIn(1, 1)[0]
	if err := c.OwnPartition(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var chs []<-chan []error
	for i := int64(1); i <= n; i++ {
		chs = append(chs, c.Commit(ctx, CommitRequest{Group: g, Generation: -1, RetentionMs: -1, Version: 8,
			Partitions: []CommitPartition{{Topic: "t", Partition: 0, Offset: i, LeaderEpoch: -1}}}))
	}
	for i, ch := range chs {
		if errs := recv(t, ch, fmt.Sprintf("commit %d", i+1)); errs[0] != nil {
			t.Fatalf("commit %d: %v", i+1, errs[0])
		}
	}
	if got, err := fetchOne(c, g); err != nil || got != n {
		t.Fatalf("committed offset after %d pipelined commits: %d, %v; want %d", n, got, err, n)
	}
	// A new owner replays the log and must find the same.
	c.DisownPartition(1)
	if err := c.OwnPartition(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	if got, err := fetchOne(c, g); err != nil || got != n {
		t.Fatalf("committed offset after reloading from the log: %d, %v; want %d", got, err, n)
	}
}
