package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/log"
)

// epochMarkers records markers with their coordinator epoch.
type epochMarkers struct {
	mu   sync.Mutex
	got  []string // "topic-partition commit@coordinatorEpoch"
	fail error
}

func (m *epochMarkers) WriteMarker(_ context.Context, topic string, p int32, _ int64, _ int16, commit bool, coordinatorEpoch int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.got = append(m.got, fmt.Sprintf("%s-%d %v@%d", topic, p, commit, coordinatorEpoch))
	return nil
}

func (m *epochMarkers) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.got
	m.got = nil
	return g
}

func (m *epochMarkers) setFail(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

// ownStore is the memory state topic with injectable append failures and
// reads held until open is closed.
type ownStore struct {
	*memStore
	mu   sync.Mutex
	fail error
	open chan struct{}
}

func (s *ownStore) Append(ctx context.Context, p int32, b []byte) (int64, error) {
	s.mu.Lock()
	err := s.fail
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return s.memStore.Append(ctx, p, b)
}

func (s *ownStore) Read(ctx context.Context, p int32, offset int64) ([]byte, int64, error) {
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	if open != nil {
		select {
		case <-open:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	return s.memStore.Read(ctx, p, offset)
}

type ownEnv struct {
	t       *testing.T
	store   *ownStore
	markers *epochMarkers
	now     time.Time
	c       *Coordinator
	pid     int64
}

// newOwnEnv is a coordinator with explicit ownership over a state topic
// of 5 partitions, owning none of them.
func newOwnEnv(t *testing.T) *ownEnv {
	e := &ownEnv{t: t, store: &ownStore{memStore: &memStore{}}, markers: &epochMarkers{}, now: time.UnixMilli(1_700_000_000_000)}
	cfg := DefaultConfig()
	cfg.Partitions = 5
	cfg.ExplicitOwnership = true
	c, err := New(cfg, Deps{Store: e.store, Markers: e.markers, Groups: &fakeGroups{}, Now: func() time.Time { return e.now },
		NextPID: func(context.Context) (int64, error) { e.pid++; return e.pid, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if !c.Loaded() {
		t.Fatal("an explicit-ownership coordinator has nothing to load as a whole")
	}
	if _, err := c.InitProducerID(ctx, "x", time.Minute, -1, -1); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("init before the topic exists: %v", err)
	}
	if err := c.EnsureTopic(ctx); err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

func (e *ownEnv) own(id string, epoch int32) {
	e.t.Helper()
	if err := e.c.OwnPartition(ctx, partitionFor(id, 5), epoch); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ownEnv) disown(id string) { e.c.DisownPartition(partitionFor(id, 5)) }

// start begins a transaction of id over partition t-0.
func (e *ownEnv) start(id string) InitResult {
	e.t.Helper()
	r, err := e.c.InitProducerID(ctx, id, 10*time.Second, -1, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.c.AddPartitions(ctx, id, r.PID, r.Epoch, []TopicPartition{{"t", 0}}); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestOwnership: ids are served only while their partition is owned;
// owning it again replays their state, and markers carry the partition's
// leader epoch as the coordinator epoch.
func TestOwnership(t *testing.T) {
	e := newOwnEnv(t)
	other := "y"
	for partitionFor(other, 5) == partitionFor("x", 5) {
		other += "y"
	}
	e.own("x", 7)
	if err := e.c.OwnPartition(ctx, partitionFor("x", 5), 7); err != nil {
		t.Fatalf("owning again at the same epoch: %v", err)
	}
	if _, err := e.c.InitProducerID(ctx, other, time.Minute, -1, -1); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("init of an id in an unowned partition: %v", err)
	}
	r := e.start("x")
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, true); err != nil {
		t.Fatal(err)
	}
	if m := e.markers.take(); len(m) != 1 || m[0] != "t-0 true@7" {
		t.Fatalf("markers: %v", m)
	}

	e.disown("x")
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("describe in a disowned partition: %v", err)
	}
	if err := e.c.AddPartitions(ctx, "x", r.PID, r.Epoch, []TopicPartition{{"t", 0}}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("AddPartitions in a disowned partition: %v", err)
	}
	if err := e.c.Verify("x", r.PID, r.Epoch, TopicPartition{"t", 0}); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("verify in a disowned partition: %v", err)
	}
	if l, err := e.c.List(ListFilter{}); err != nil || len(l) != 0 {
		t.Fatalf("list after disown: %+v %v", l, err)
	}

	e.own("x", 8)
	if d, err := e.c.Describe("x"); err != nil || d.PID != r.PID || d.Epoch != r.Epoch || d.State != CompleteCommit {
		t.Fatalf("after owning again: %+v %v", d, err)
	}
	r2 := e.start("x")
	if err := e.c.EndTxn(ctx, "x", r2.PID, r2.Epoch, false); err != nil {
		t.Fatal(err)
	}
	if m := e.markers.take(); len(m) != 1 || m[0] != "t-0 false@8" {
		t.Fatalf("markers at the new epoch: %v", m)
	}
}

// TestOwnershipCompletion: a transaction decided but not completed when
// its partition is disowned stops being retried here, and the next owner
// finishes it from the log.
func TestOwnershipCompletion(t *testing.T) {
	e := newOwnEnv(t)
	e.own("x", 1)
	r := e.start("x")
	e.markers.setFail(errors.New("leader unreachable"))
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, true); err != nil {
		t.Fatalf("EndTxn answers once the decision is durable: %v", err)
	}
	e.disown("x")
	e.c.wg.Wait() // the background completion ended with the ownership
	e.markers.setFail(nil)
	if m := e.markers.take(); len(m) != 0 {
		t.Fatalf("markers written after disown: %v", m)
	}
	e.own("x", 2)
	e.c.wg.Wait()
	if d, err := e.c.Describe("x"); err != nil || d.State != CompleteCommit {
		t.Fatalf("after the new owner finished it: %+v %v", d, err)
	}
	if m := e.markers.take(); len(m) != 1 || m[0] != "t-0 true@2" {
		t.Fatalf("markers of the new owner: %v", m)
	}
}

// TestOwnershipTimeouts: timed-out transactions are aborted only in owned
// partitions.
func TestOwnershipTimeouts(t *testing.T) {
	e := newOwnEnv(t)
	e.own("x", 1)
	e.start("x")
	e.disown("x")
	e.now = e.now.Add(time.Minute)
	e.c.AbortExpired()
	if m := e.markers.take(); len(m) != 0 {
		t.Fatalf("aborted a transaction of a disowned partition: %v", m)
	}
	e.own("x", 2)
	if d, _ := e.c.Describe("x"); d.State != Ongoing {
		t.Fatalf("replayed: %+v", d)
	}
	e.c.AbortExpired()
	if d, _ := e.c.Describe("x"); d.State != CompleteAbort {
		t.Fatalf("after the sweep: %+v", d)
	}
	if m := e.markers.take(); len(m) != 1 || m[0] != "t-0 false@2" {
		t.Fatalf("abort markers: %v", m)
	}
}

// TestOwnershipNotLeader: an append the log refuses because this broker no
// longer leads the partition is NOT_COORDINATOR, not a storage error.
func TestOwnershipNotLeader(t *testing.T) {
	e := newOwnEnv(t)
	e.own("x", 1)
	e.store.mu.Lock()
	e.store.fail = fmt.Errorf("%w: __transaction_state-1", log.ErrNotLeader)
	e.store.mu.Unlock()
	if _, err := e.c.InitProducerID(ctx, "x", time.Minute, -1, -1); !errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrStore) {
		t.Fatalf("init refused by the log: %v", err)
	}
}

// TestOwnershipLoading: requests for a partition being loaded answer
// COORDINATOR_LOAD_IN_PROGRESS; disowning it mid-load ends the load.
func TestOwnershipLoading(t *testing.T) {
	e := newOwnEnv(t)
	e.store.mu.Lock()
	e.store.open = make(chan struct{})
	e.store.mu.Unlock()
	p := partitionFor("x", 5)
	done := make(chan error, 1)
	go func() { done <- e.c.OwnPartition(ctx, p, 1) }()
	waitFor(t, func() bool { _, err := e.c.Describe("x"); return errors.Is(err, ErrLoading) })
	if _, err := e.c.List(ListFilter{}); !errors.Is(err, ErrLoading) {
		t.Fatalf("list while a partition loads: %v", err)
	}
	e.c.DisownPartition(p)
	if err := <-done; !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("load of a partition disowned mid-load: %v", err)
	}
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("describe after the aborted load: %v", err)
	}
	go func() { done <- e.c.OwnPartition(ctx, p, 2) }()
	waitFor(t, func() bool { _, err := e.c.Describe("x"); return errors.Is(err, ErrLoading) })
	close(e.store.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("describe once loaded: %v", err)
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
// but has not started to own it, its transactional ids answer ErrLoading
// (COORDINATOR_LOAD_IN_PROGRESS), not ErrNotCoordinator.
func TestOwnershipClaimed(t *testing.T) {
	e := newOwnEnv(t)
	var claimed atomic.Int32
	claimed.Store(-1)
	e.c.cfg.Claimed = func(p int32) bool { return p == claimed.Load() }
	p := partitionFor("x", 5)
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("describe, nothing owned or claimed: %v", err)
	}
	claimed.Store(p)
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrLoading) {
		t.Fatalf("describe, partition claimed: %v", err)
	}
	e.own("x", 1)
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("describe once owned: %v", err)
	}
	claimed.Store(-1)
	e.c.DisownPartition(p)
	if _, err := e.c.Describe("x"); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("describe, neither owned nor claimed: %v", err)
	}
}
