package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// memStore is an in-memory state topic.
type memStore struct {
	mu    sync.Mutex
	parts [][][]byte
	next  []int64
}

func (s *memStore) Partitions() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int32(len(s.parts))
}

func (s *memStore) Create(_ context.Context, n int32) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.parts) == 0 {
		s.parts, s.next = make([][][]byte, n), make([]int64, n)
	}
	return int32(len(s.parts)), nil
}

func (s *memStore) Append(_ context.Context, p int32, b []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := append([]byte(nil), b...)
	base := s.next[p]
	batch.SetBaseOffset(c, base)
	s.next[p] += int64(binary.BigEndian.Uint32(c[23:])) + 1
	s.parts[p] = append(s.parts[p], c)
	return base, nil
}

func (s *memStore) Read(_ context.Context, p int32, offset int64) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []byte
	for _, b := range s.parts[p] {
		if batch.LastOffset(b) >= offset {
			out = append(out, b...)
		}
	}
	return out, s.next[p], nil
}

type marker struct {
	tp     TopicPartition
	pid    int64
	epoch  int16
	commit bool
}

type fakeMarkers struct {
	mu   sync.Mutex
	got  []marker
	fail error
}

func (m *fakeMarkers) WriteMarker(_ context.Context, topic string, p int32, pid int64, epoch int16, commit bool, _ int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.got = append(m.got, marker{TopicPartition{topic, p}, pid, epoch, commit})
	return nil
}

func (m *fakeMarkers) take() []marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.got
	m.got = nil
	return g
}

type fakeGroups struct {
	mu        sync.Mutex
	completed []string
}

func (g *fakeGroups) Partition(string) int32            { return 7 }
func (g *fakeGroups) EnsureTopic(context.Context) error { return nil }
func (g *fakeGroups) CompleteTxn(_ context.Context, p int32, pid int64, commit bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.completed = append(g.completed, fmt.Sprintf("%d/%d/%v", p, pid, commit))
	return nil
}

type env struct {
	t       *testing.T
	store   *memStore
	markers *fakeMarkers
	groups  *fakeGroups
	now     time.Time
	c       *Coordinator
	pid     int64
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, store: &memStore{}, markers: &fakeMarkers{}, groups: &fakeGroups{}, now: time.UnixMilli(1_700_000_000_000)}
	e.open()
	return e
}

func (e *env) open() {
	cfg := DefaultConfig()
	cfg.Partitions = 5
	c, err := New(cfg, Deps{Store: e.store, Markers: e.markers, Groups: e.groups, Now: func() time.Time { return e.now },
		NextPID: func(context.Context) (int64, error) { e.pid++; return e.pid, nil }})
	if err != nil {
		e.t.Fatal(err)
	}
	if !c.loadAll() {
		e.t.Fatal("load")
	}
	e.c = c
	e.t.Cleanup(c.Close)
}

// restart replays the state into a new coordinator and waits for it to
// finish interrupted completions.
func (e *env) restart() {
	e.c.Close()
	e.open()
	e.c.wg.Wait()
}

var ctx = context.Background()

func (e *env) describe(id string) Description {
	d, err := e.c.Describe(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	tp := TopicPartition{"t", 0}
	if _, err := e.c.InitProducerID(ctx, "x", 0, -1, -1); !errors.Is(err, ErrInvalidTimeout) {
		t.Fatalf("timeout 0: %v", err)
	}
	if _, err := e.c.InitProducerID(ctx, "x", time.Hour, -1, -1); !errors.Is(err, ErrInvalidTimeout) {
		t.Fatalf("timeout over the max: %v", err)
	}
	r, err := e.c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	if err != nil || r.Epoch != 0 {
		t.Fatalf("init: %+v %v", r, err)
	}
	if err := e.c.Verify("x", r.PID, r.Epoch, tp); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("produce before AddPartitions: %v", err)
	}
	if err := e.c.AddPartitions(ctx, "x", r.PID, r.Epoch, []TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.AddOffsets(ctx, "x", r.PID, r.Epoch, "g"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Verify("x", r.PID, r.Epoch, tp); err != nil {
		t.Fatal(err)
	}
	if d := e.describe("x"); d.State != Ongoing || len(d.Partitions) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch+1, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("EndTxn with a wrong epoch: %v", err)
	}
	if err := e.c.EndTxn(ctx, "x", r.PID+1, r.Epoch, true); !errors.Is(err, ErrInvalidMapping) {
		t.Fatalf("EndTxn with a wrong pid: %v", err)
	}
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, true); err != nil {
		t.Fatal(err)
	}
	if m := e.markers.take(); len(m) != 2 || !m[0].commit {
		t.Fatalf("markers: %+v", m)
	}
	if len(e.groups.completed) != 1 || e.groups.completed[0] != fmt.Sprintf("7/%d/true", r.PID) {
		t.Fatalf("group completion: %v", e.groups.completed)
	}
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, true); err != nil {
		t.Fatalf("retried EndTxn: %v", err)
	}
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, false); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("abort after commit: %v", err)
	}
	if d := e.describe("x"); d.State != CompleteCommit || len(d.Partitions) != 0 {
		t.Fatalf("describe: %+v", d)
	}

	// A new incarnation fences the old one and aborts its transaction.
	if err := e.c.AddPartitions(ctx, "x", r.PID, r.Epoch, []TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	r2, err := e.c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	if err != nil || r2.PID != r.PID || r2.Epoch != r.Epoch+2 {
		t.Fatalf("re-init: %+v %v", r2, err)
	}
	if m := e.markers.take(); len(m) != 1 || m[0].commit || m[0].epoch != r.Epoch+1 {
		t.Fatalf("fencing abort markers: %+v", m)
	}
	if err := e.c.AddPartitions(ctx, "x", r.PID, r.Epoch, []TopicPartition{tp}); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("fenced producer: %v", err)
	}
	// KIP-360: the current producer re-inits with its id and epoch; a
	// retry of that (the old epoch) gets the same answer; others are fenced.
	r3, err := e.c.InitProducerID(ctx, "x", time.Minute, r2.PID, r2.Epoch)
	if err != nil || r3.Epoch != r2.Epoch+1 {
		t.Fatalf("KIP-360 init: %+v %v", r3, err)
	}
	if r4, err := e.c.InitProducerID(ctx, "x", time.Minute, r2.PID, r2.Epoch); err != nil || r4 != r3 {
		t.Fatalf("retried KIP-360 init: %+v %v", r4, err)
	}
	if _, err := e.c.InitProducerID(ctx, "x", time.Minute, r2.PID, r.Epoch); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("stale KIP-360 init: %v", err)
	}

	// The state survives a restart.
	e.restart()
	if d := e.describe("x"); d.PID != r3.PID || d.Epoch != r3.Epoch || d.State != Empty {
		t.Fatalf("after restart: %+v", d)
	}
	l, _ := e.c.List(ListFilter{States: []State{Empty}})
	if len(l) != 1 || l[0].ID != "x" {
		t.Fatalf("list: %+v", l)
	}
}

func TestTimeoutAbort(t *testing.T) {
	e := newEnv(t)
	r, _ := e.c.InitProducerID(ctx, "x", 10*time.Second, -1, -1)
	if err := e.c.AddPartitions(ctx, "x", r.PID, r.Epoch, []TopicPartition{{"t", 1}}); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(5 * time.Second)
	e.c.AbortExpired()
	if d := e.describe("x"); d.State != Ongoing {
		t.Fatalf("aborted early: %+v", d)
	}
	e.now = e.now.Add(6 * time.Second)
	e.c.AbortExpired()
	if d := e.describe("x"); d.State != CompleteAbort || d.Epoch != r.Epoch+1 {
		t.Fatalf("after timeout: %+v", d)
	}
	if m := e.markers.take(); len(m) != 1 || m[0].commit {
		t.Fatalf("markers: %+v", m)
	}
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("commit after the timeout abort: %v", err)
	}
}

// TestRestartMidCommit: markers fail after PrepareCommit is durable; a
// restarted coordinator finishes the commit.
func TestRestartMidCommit(t *testing.T) {
	e := newEnv(t)
	r, _ := e.c.InitProducerID(ctx, "x", time.Minute, -1, -1)
	parts := []TopicPartition{{"t", 0}, {"t", 1}}
	if err := e.c.AddPartitions(ctx, "x", r.PID, r.Epoch, parts); err != nil {
		t.Fatal(err)
	}
	e.markers.fail = errors.New("disk on fire")
	if err := e.c.EndTxn(ctx, "x", r.PID, r.Epoch, true); err != nil {
		t.Fatalf("EndTxn answers once the decision is durable: %v", err)
	}
	if _, err := e.c.InitProducerID(ctx, "x", time.Minute, -1, -1); !errors.Is(err, ErrConcurrentTransactions) {
		t.Fatalf("init while completing: %v", err)
	}
	e.c.Close()
	if d := e.describe("x"); d.State != PrepareCommit {
		t.Fatalf("before restart: %+v", d)
	}
	e.markers.fail = nil
	e.restart()
	if d := e.describe("x"); d.State != CompleteCommit {
		t.Fatalf("after restart: %+v", d)
	}
	if m := e.markers.take(); len(m) != 2 || !m[0].commit || !m[1].commit {
		t.Fatalf("markers after restart: %+v", m)
	}
}

func TestPartitionFor(t *testing.T) {
	// Java's String.hashCode: "hello" is 99162322; "polygenelubricants"
	// is Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
	for _, c := range []struct {
		id   string
		want int32
	}{{"", 0}, {"a", 97 % 50}, {"hello", 99162322 % 50}, {"polygenelubricants", 0}} {
		if got := partitionFor(c.id, 50); got != c.want {
			t.Errorf("partitionFor(%q) = %d, want %d", c.id, got, c.want)
		}
	}
}
