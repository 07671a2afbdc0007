package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/etcd"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

var bg = context.Background()

// eventually polls cond until it returns nil or within passes. Tests wait
// for background effects this way, never by sleeping a fixed time.
func eventually(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testLogger sends node logs to t.Log (shown for failed tests and -v) until
// the test's cleanups are done.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first: runs after the nodes are closed
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// recorder is a Handler that checks the contract as it is called: calls
// for one partition never overlap, no Acquire of a held partition, no
// Release of one not held, FenceCompares valid during Acquire, and a
// graceful Release only while the leader key is still ours.
type recorder struct {
	t    *testing.T
	id   int32
	obs  meta.Store // a separate connection, to look at the keys
	node atomic.Pointer[Node]

	mu       sync.Mutex
	held     map[TopicPartition]int32
	inCall   map[TopicPartition]bool
	fail     func(tp TopicPartition, epoch int32) error
	tried    map[TopicPartition][]int32 // epochs of every Acquire call
	graceful int
	fenced   int
}

func newRecorder(t *testing.T, id int32, obs meta.Store) *recorder {
	return &recorder{t: t, id: id, obs: obs, held: map[TopicPartition]int32{},
		inCall: map[TopicPartition]bool{}, tried: map[TopicPartition][]int32{}}
}

func (r *recorder) enter(tp TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inCall[tp] {
		r.t.Errorf("broker %d: overlapping handler calls for %v", r.id, tp)
	}
	r.inCall[tp] = true
}

func (r *recorder) exit(tp TopicPartition) {
	r.mu.Lock()
	delete(r.inCall, tp)
	r.mu.Unlock()
}

func (r *recorder) Acquire(ctx context.Context, tp TopicPartition, epoch int32) error {
	r.enter(tp)
	defer r.exit(tp)
	r.mu.Lock()
	if e, ok := r.held[tp]; ok {
		r.t.Errorf("broker %d: Acquire(%v, %d) while holding it at epoch %d", r.id, tp, epoch, e)
	}
	if tried := r.tried[tp]; len(tried) > 0 && tried[len(tried)-1] >= epoch {
		r.t.Errorf("broker %d: Acquire(%v) at epoch %d after %d", r.id, tp, epoch, tried[len(tried)-1])
	}
	r.tried[tp] = append(r.tried[tp], epoch)
	fail := r.fail
	r.mu.Unlock()
	// The log engine reads the fence during Acquire.
	if n := r.node.Load(); n != nil {
		if _, e, ok := n.FenceCompares(tp); (!ok || e != epoch) && ctx.Err() == nil {
			r.t.Errorf("broker %d: FenceCompares(%v) during Acquire = %d, %v; want %d", r.id, tp, e, ok, epoch)
		}
	}
	if fail != nil {
		if err := fail(tp, epoch); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.held[tp] = epoch
	r.mu.Unlock()
	return nil
}

func (r *recorder) Release(tp TopicPartition, fenced bool) {
	r.enter(tp)
	defer r.exit(tp)
	r.mu.Lock()
	e, ok := r.held[tp]
	r.mu.Unlock()
	if !ok {
		r.t.Errorf("broker %d: Release(%v, %v) of a partition it does not hold", r.id, tp, fenced)
	}
	if !fenced {
		// Before the key is deleted: still ours, and the fence still
		// admits writes.
		kv, err := r.obs.Get(bg, leaderKey(tp))
		var lv leaderValue
		if err != nil || json.Unmarshal(kv.Value, &lv) != nil || lv.Broker != r.id || lv.Epoch != e {
			r.t.Errorf("broker %d: graceful Release(%v) at epoch %d, but the leader key is %q, %v", r.id, tp, e, kv.Value, err)
		}
		if n := r.node.Load(); n != nil {
			// As the log engine does: a compare that fails because a
			// claim of another partition bumped the session's fence is
			// retried once the fence is read again.
			var err error
			for range 3 {
				cmps, _, ok := n.FenceCompares(tp)
				if !ok {
					r.t.Errorf("broker %d: no FenceCompares during graceful Release(%v)", r.id, tp)
					break
				}
				err = r.obs.Txn(bg, cmps, meta.Put(fmt.Sprintf("test/flush/%s/%d", tp.Topic, tp.Partition), nil))
				if !errors.Is(err, meta.ErrConflict) {
					break
				}
				if rerr := n.RefreshFence(bg, err); rerr != nil {
					r.t.Errorf("broker %d: RefreshFence: %v", r.id, rerr)
				}
			}
			if err != nil {
				r.t.Errorf("broker %d: a flush during graceful Release(%v) failed: %v", r.id, tp, err)
			}
		}
	}
	r.mu.Lock()
	delete(r.held, tp)
	if fenced {
		r.fenced++
	} else {
		r.graceful++
	}
	r.mu.Unlock()
}

func (r *recorder) holding(tp TopicPartition) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.held[tp]
	return e, ok
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

func (r *recorder) releases() (graceful, fenced int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.graceful, r.fenced
}

func (r *recorder) setFail(f func(tp TopicPartition, epoch int32) error) {
	r.mu.Lock()
	r.fail = f
	r.mu.Unlock()
}

func (r *recorder) attempts(tp TopicPartition) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tried[tp])
}

// testCluster is one embedded etcd and the nodes over it, each with its own
// connection (its own meta store), as separate processes would have.
type testCluster struct {
	t      *testing.T
	srv    *etcdtest.Server
	log    *slog.Logger
	prefix string
	ttl    time.Duration
	parts  []TopicPartition
	obs    *etcd.Store
}

type testNode struct {
	id    int32
	store *etcd.Store
	node  *Node
	rec   *recorder
}

// newCluster starts etcd; topics are "orders" (2/3 of nparts) and
// "audit.log".
func newCluster(t *testing.T, ttl time.Duration, nparts int) *testCluster {
	c := &testCluster{t: t, log: testLogger(t), ttl: ttl, prefix: "/sluice-test/" + t.Name() + "/"}
	c.srv = etcdtest.Start(t)
	for i := range nparts {
		if i < 2*nparts/3 {
			c.parts = append(c.parts, TopicPartition{"orders", int32(i)})
		} else {
			c.parts = append(c.parts, TopicPartition{"audit.log", int32(i - 2*nparts/3)})
		}
	}
	c.obs = c.openStore()
	return c
}

func (c *testCluster) openStore() *etcd.Store {
	c.t.Helper()
	s, err := etcd.New(bg, etcd.Config{Endpoints: []string{c.srv.Endpoint()}, Prefix: c.prefix,
		DialTimeout: 10 * time.Second, RequestTimeout: time.Second})
	if err != nil {
		c.t.Fatalf("etcd.New: %v", err)
	}
	c.t.Cleanup(func() { s.Close() })
	return s
}

func (c *testCluster) config(id int32) Config {
	cfg := DefaultConfig()
	cfg.BrokerID = id
	cfg.Host = "127.0.0.1"
	cfg.Port = 9000 + id
	cfg.LeaseTTL = c.ttl
	cfg.Logger = c.log
	return cfg
}

// tryStart starts a node on its own store and gives it every partition.
func (c *testCluster) tryStart(id int32, edit func(*Config)) (*testNode, error) {
	tn := &testNode{id: id, store: c.openStore()}
	tn.rec = newRecorder(c.t, id, c.obs)
	cfg := c.config(id)
	if edit != nil {
		edit(&cfg)
	}
	n, err := Start(bg, tn.store, cfg, tn.rec)
	if err != nil {
		return nil, err
	}
	tn.node = n
	tn.rec.node.Store(n)
	c.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			c.t.Logf("closing broker %d: %v", id, err)
		}
	})
	n.SetPartitions(c.parts)
	return tn, nil
}

func (c *testCluster) start(id int32) *testNode {
	c.t.Helper()
	tn, err := c.tryStart(id, nil)
	if err != nil {
		c.t.Fatalf("Start broker %d: %v", id, err)
	}
	return tn
}

// kill makes a node die without Close: its connection to etcd goes, so its
// lease is no longer renewed and its keys vanish TTL later.
func (c *testCluster) kill(tn *testNode) {
	tn.store.Close()
}

func closeNode(t *testing.T, tn *testNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if err := tn.node.Close(ctx); err != nil {
		t.Fatalf("Close broker %d: %v", tn.id, err)
	}
}

// check returns nil when every partition is led by exactly one of nodes,
// whose handler holds it at the epoch every node sees, and no other handler
// (of dead ones too) holds it.
func (c *testCluster) check(nodes []*testNode, dead ...*testNode) error {
	for _, tp := range c.parts {
		var leader *testNode
		var epoch int32
		for _, tn := range nodes {
			if e, ok := tn.node.IsLeader(tp); ok {
				if leader != nil {
					return fmt.Errorf("%v led by both %d and %d", tp, leader.id, tn.id)
				}
				leader, epoch = tn, e
			}
		}
		if leader == nil {
			return fmt.Errorf("%v has no leader", tp)
		}
		if epoch < 1 {
			return fmt.Errorf("%v at epoch %d", tp, epoch)
		}
		for _, tn := range nodes {
			if l, ok := tn.node.Leader(tp); !ok || l != (Leadership{Broker: leader.id, Epoch: epoch}) {
				return fmt.Errorf("broker %d sees %v led by %+v (%v), want %d at epoch %d", tn.id, tp, l, ok, leader.id, epoch)
			}
		}
		for _, tn := range append(slices.Clone(nodes), dead...) {
			e, holds := tn.rec.holding(tp)
			switch {
			case tn == leader && (!holds || e != epoch):
				return fmt.Errorf("broker %d leads %v at %d but its handler holds %d (%v)", tn.id, tp, epoch, e, holds)
			case tn != leader && holds:
				return fmt.Errorf("broker %d's handler holds %v at %d, led by %d at %d", tn.id, tp, e, leader.id, epoch)
			}
		}
	}
	return nil
}

// settled is check plus: every node sees exactly nodes as members, and
// every partition is on its desired owner (no hand-off left to do).
func (c *testCluster) settled(nodes []*testNode, dead ...*testNode) error {
	if err := c.check(nodes, dead...); err != nil {
		return err
	}
	var ids []int32
	for _, tn := range nodes {
		ids = append(ids, tn.id)
	}
	slices.Sort(ids)
	for _, tn := range nodes {
		if got := brokerIDs(tn.node.Brokers()); !slices.Equal(got, ids) {
			return fmt.Errorf("broker %d: Brokers() = %v, want %v", tn.id, got, ids)
		}
	}
	desired := assign(c.partSet(), nil, ids)
	for _, tp := range c.parts {
		if want, got := desired[tp], leaderOf(nodes, tp); got != want {
			return fmt.Errorf("%v on broker %d, want %d", tp, got, want)
		}
	}
	return nil
}

// partSet is c.parts as the set a node is given.
func (c *testCluster) partSet() map[TopicPartition]struct{} {
	set := make(map[TopicPartition]struct{}, len(c.parts))
	for _, tp := range c.parts {
		set[tp] = struct{}{}
	}
	return set
}

func leaderOf(nodes []*testNode, tp TopicPartition) int32 {
	for _, tn := range nodes {
		if _, ok := tn.node.IsLeader(tp); ok {
			return tn.id
		}
	}
	return -1
}

// leaders returns each partition's leadership as nodes[0] sees it.
func (c *testCluster) leaders(tn *testNode) map[TopicPartition]Leadership {
	out := map[TopicPartition]Leadership{}
	for _, tp := range c.parts {
		if l, ok := tn.node.Leader(tp); ok {
			out[tp] = l
		}
	}
	return out
}

// checkBalance: every node holds between lo and hi partitions.
func checkBalance(t *testing.T, nodes []*testNode, lo, hi int) {
	t.Helper()
	for _, tn := range nodes {
		if n := tn.rec.count(); n < lo || n > hi {
			t.Errorf("broker %d leads %d partitions, want %d..%d", tn.id, n, lo, hi)
		}
	}
}

func brokerIDs(bs []Broker) []int32 {
	var ids []int32
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}
