package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Deadlines for background effects. They are generous: the tests assert
// what happens, not how fast, except where the point is "without waiting
// for a lease" (graceful moves, with a long TTL).
const settle = 20 * time.Second

// TestThreeNodes: every partition has exactly one leader, the load is
// spread, epochs start at 1, and all nodes agree.
func TestThreeNodes(t *testing.T) {
	c := newCluster(t, 2*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led by its desired owner", func() error { return c.settled(nodes) })
	checkBalance(t, nodes, 5, 15)
	for _, tn := range nodes {
		if got := brokerIDs(tn.node.Brokers()); !slices.Equal(got, []int32{1, 2, 3}) {
			t.Errorf("broker %d: Brokers() = %v", tn.id, got)
		}
		if b := tn.node.Brokers()[tn.id-1]; b.Host != "127.0.0.1" || b.Port != 9000+tn.id {
			t.Errorf("broker %d advertises %+v", tn.id, b)
		}
		if _, fenced := tn.rec.releases(); fenced != 0 {
			t.Errorf("broker %d: %d fenced releases in a quiet cluster", tn.id, fenced)
		}
	}
	// FenceCompares hold for the current leader.
	tp := c.parts[0]
	for _, tn := range nodes {
		cmps, e, ok := tn.node.FenceCompares(tp)
		le, leads := tn.node.IsLeader(tp)
		if ok != leads || (ok && e != le) {
			t.Errorf("broker %d: FenceCompares ok=%v epoch %d, IsLeader %v epoch %d", tn.id, ok, e, leads, le)
		}
		if ok {
			if err := c.obs.Txn(bg, cmps, meta.Put("test/data", []byte("x"))); err != nil {
				t.Errorf("Txn with the leader's compares: %v", err)
			}
		}
	}
}

// TestGracefulClose: a closed broker's partitions move at once (the TTL is
// long, so nothing here waits for a lease), released before their keys
// were deleted, at higher epochs.
func TestGracefulClose(t *testing.T) {
	c := newCluster(t, 10*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	before := c.leaders(nodes[0])
	held := nodes[1].rec.count()
	if held == 0 {
		t.Fatal("broker 2 leads nothing")
	}
	graceful0, _ := nodes[1].rec.releases() // hand-offs while the cluster formed

	closeNode(t, nodes[1])
	if n := nodes[1].rec.count(); n != 0 {
		t.Errorf("after Close broker 2's handler still holds %d partitions", n)
	}
	// The recorder checked in each Release(false) that the key was still
	// there; none may have been fenced.
	if graceful, fenced := nodes[1].rec.releases(); graceful-graceful0 != held || fenced != 0 {
		t.Errorf("broker 2 released %d gracefully and %d fenced, want %d and 0", graceful, fenced, held)
	}
	rest := []*testNode{nodes[0], nodes[2]}
	eventually(t, c.ttl/2, "partitions moved without waiting for the lease", func() error { return c.settled(rest, nodes[1]) })
	after := c.leaders(nodes[0])
	for tp, l := range before {
		switch {
		case l.Broker == 2 && after[tp].Epoch <= l.Epoch:
			t.Errorf("%v moved from broker 2 at epoch %d to %+v", tp, l.Epoch, after[tp])
		case l.Broker != 2 && after[tp] != l:
			t.Errorf("%v moved from %+v to %+v though its leader stayed", tp, l, after[tp])
		}
	}
	for _, tn := range rest {
		if got := brokerIDs(tn.node.Brokers()); !slices.Equal(got, []int32{1, 3}) {
			t.Errorf("broker %d: Brokers() = %v", tn.id, got)
		}
	}
	if err := nodes[1].node.Close(bg); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestKilledNode: a broker that dies without Close loses its partitions
// when its lease expires: the others, which reached etcd all along,
// depose its holding at once and take over. The dead broker, cut off
// from etcd, stops serving before that; it cannot tell whether it was
// deposed, so its handler keeps the partitions (serving none of them).
func TestKilledNode(t *testing.T) {
	c := newCluster(t, 2*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	before := c.leaders(nodes[0])

	c.kill(nodes[2])
	killed := time.Now()
	rest := nodes[:2]
	eventually(t, c.ttl+5*time.Second-time.Since(killed), "partitions taken over", func() error { return c.check(rest) })
	for _, tp := range c.parts {
		if _, ok := nodes[2].node.IsLeader(tp); ok {
			t.Errorf("the dead broker still reports %v as led", tp)
		}
	}
	after := c.leaders(nodes[0])
	for tp, l := range before {
		if l.Broker == 3 && (after[tp].Epoch <= l.Epoch || after[tp].Broker == 3) {
			t.Errorf("%v moved from %+v to %+v", tp, l, after[tp])
		}
	}
	eventually(t, settle, "membership", func() error { return c.settled(rest) })
	checkBalance(t, rest, 8, 22)
}

// TestJoin: a fourth broker receives a share, handed over gracefully. The
// bounded-load assignment may move a few partitions between the others
// too, also gracefully and at a new epoch.
func TestJoin(t *testing.T) {
	c := newCluster(t, 2*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	before := c.leaders(nodes[0])
	graceful0 := 0 // hand-offs while the cluster formed
	for _, tn := range nodes {
		g, _ := tn.rec.releases()
		graceful0 += g
	}

	nodes = append(nodes, c.start(4))
	eventually(t, settle, "rebalanced onto four brokers", func() error { return c.settled(nodes) })
	if n := nodes[3].rec.count(); n == 0 {
		t.Error("broker 4 leads nothing")
	}
	checkBalance(t, nodes, 3, 12)
	after := c.leaders(nodes[0])
	moved, toNew := 0, 0
	for tp, l := range before {
		a := after[tp]
		if a.Broker == l.Broker {
			if a != l {
				t.Errorf("%v stayed on broker %d but its epoch went from %d to %d", tp, l.Broker, l.Epoch, a.Epoch)
			}
			continue
		}
		moved++
		if a.Broker == 4 {
			toNew++
		}
		if a.Epoch <= l.Epoch {
			t.Errorf("%v moved from %+v to %+v without a new epoch", tp, l, a)
		}
	}
	if toNew == 0 || moved > len(before)/2 {
		t.Errorf("%d of %d partitions moved, %d of them to the new broker", moved, len(before), toNew)
	}
	graceful := -graceful0
	for _, tn := range nodes {
		g, fenced := tn.rec.releases()
		graceful += g
		if fenced != 0 {
			t.Errorf("broker %d: %d fenced releases during a join", tn.id, fenced)
		}
	}
	if graceful != moved {
		t.Errorf("%d graceful releases for %d moved partitions", graceful, moved)
	}
}

// TestFenceCompares: compares taken while leading fail once the
// partition (or any other partition the session gave up) is claimed
// again, by another broker or by the same one, and once the session ends;
// the leader's current compares hold.
func TestFenceCompares(t *testing.T) {
	c := newCluster(t, 2*time.Second, 4)
	n1 := c.start(1)
	eventually(t, settle, "every partition led", func() error { return c.check([]*testNode{n1}) })
	tp := c.parts[0]
	write := func(cmps []meta.Compare) error { return c.obs.Txn(bg, cmps, meta.Put("test/data", nil)) }

	old, e1, ok := n1.node.FenceCompares(tp)
	if !ok || write(old) != nil {
		t.Fatalf("FenceCompares = %v, %d, %v; write: %v", old, e1, ok, write(old))
	}
	if other, _, _ := n1.node.FenceCompares(c.parts[1]); !slices.Equal(other, old) {
		t.Errorf("FenceCompares of two partitions of one session differ: %v, %v", old, other)
	}
	// Given up: the leader key is deleted and FenceCompares stops
	// reporting it at once.
	n1.node.SetPartitions(c.parts[1:])
	eventually(t, settle, "released", func() error {
		if _, ok := n1.node.Leader(tp); ok {
			return errors.New("still led")
		}
		if _, _, ok := n1.node.FenceCompares(tp); ok {
			return errors.New("FenceCompares still reports it")
		}
		return nil
	})
	// Same broker again, new epoch: the claim bumped the fence.
	n1.node.SetPartitions(c.parts)
	eventually(t, settle, "led again", func() error { return c.check([]*testNode{n1}) })
	cur, e2, _ := n1.node.FenceCompares(tp)
	if e2 <= e1 {
		t.Errorf("epoch %d after %d", e2, e1)
	}
	if err := write(old); !errors.Is(err, meta.ErrConflict) {
		t.Errorf("write with the previous epoch's compares = %v, want ErrConflict", err)
	}
	if err := write(cur); err != nil {
		t.Errorf("write with the current compares: %v", err)
	}
	// Another broker joins and takes some partitions over while broker 1
	// lives: each of those claims bumps broker 1's fence.
	n2 := c.start(2)
	eventually(t, settle, "spread over both", func() error {
		if err := c.check([]*testNode{n1, n2}); err != nil {
			return err
		}
		for _, p := range c.parts {
			if _, ok := n2.node.IsLeader(p); ok {
				return nil
			}
		}
		return errors.New("broker 2 leads nothing yet")
	})
	if err := write(cur); !errors.Is(err, meta.ErrConflict) {
		t.Errorf("write with compares from before broker 2 took partitions over = %v, want ErrConflict", err)
	}
	var still TopicPartition
	for _, p := range c.parts {
		if _, ok := n1.node.IsLeader(p); ok {
			still = p
		}
	}
	eventually(t, settle, "broker 1's fence seen", func() error {
		now, _, ok := n1.node.FenceCompares(still)
		if !ok {
			return errors.New("not led")
		}
		return write(now)
	})
	// Broker 1 leaves: everything moves and its fence goes with its session.
	last, _, _ := n1.node.FenceCompares(still)
	closeNode(t, n1)
	eventually(t, settle, "moved to broker 2", func() error { return c.check([]*testNode{n2}, n1) })
	now, e3, _ := n2.node.FenceCompares(tp)
	if e3 <= e2 {
		t.Errorf("epoch %d after %d", e3, e2)
	}
	if err := write(last); !errors.Is(err, meta.ErrConflict) {
		t.Errorf("write with the old leader's compares = %v, want ErrConflict", err)
	}
	if err := write(now); err != nil {
		t.Errorf("write with the new leader's compares: %v", err)
	}
}

// TestDuplicateID: a second broker with a live broker's id is refused; a
// restarted broker whose previous incarnation died waits for its lease.
func TestDuplicateID(t *testing.T) {
	c := newCluster(t, 2*time.Second, 6)
	n1 := c.start(1)
	eventually(t, settle, "every partition led", func() error { return c.check([]*testNode{n1}) })

	_, err := c.tryStart(1, nil)
	if !errors.Is(err, ErrBrokerIDInUse) {
		t.Fatalf("second broker 1: %v, want ErrBrokerIDInUse", err)
	}
	t.Logf("refused: %v", err)
	if err := c.check([]*testNode{n1}); err != nil {
		t.Fatalf("the first broker 1 was disturbed: %v", err)
	}

	c.kill(n1)
	again := c.start(1) // waits for the dead incarnation's lease
	eventually(t, settle, "the new incarnation leads", func() error { return c.check([]*testNode{again}) })
}

// TestController: exactly one controller; another takes over when it
// leaves.
func TestController(t *testing.T) {
	c := newCluster(t, 2*time.Second, 3)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	one := func(nodes []*testNode) (*testNode, error) {
		var ctrl *testNode
		for _, tn := range nodes {
			if tn.node.IsController() {
				if ctrl != nil {
					return nil, fmt.Errorf("brokers %d and %d are both controller", ctrl.id, tn.id)
				}
				ctrl = tn
			}
		}
		if ctrl == nil {
			return nil, errors.New("no controller")
		}
		for _, tn := range nodes {
			if id := tn.node.ControllerID(); id != ctrl.id {
				return nil, fmt.Errorf("broker %d sees controller %d, want %d", tn.id, id, ctrl.id)
			}
		}
		return ctrl, nil
	}
	var ctrl *testNode
	eventually(t, settle, "one controller", func() (err error) { ctrl, err = one(nodes); return err })

	closeNode(t, ctrl)
	if ctrl.node.IsController() {
		t.Error("IsController after Close")
	}
	rest := slices.DeleteFunc(slices.Clone(nodes), func(tn *testNode) bool { return tn == ctrl })
	var next *testNode
	eventually(t, settle, "a new controller", func() (err error) { next, err = one(rest); return err })
	if next == ctrl {
		t.Fatal("the closed broker is still controller")
	}
}

// TestAcquireFailure: a failed Acquire gives the leadership up; it is
// retried at a new epoch, and a broker that keeps failing is bypassed.
func TestAcquireFailure(t *testing.T) {
	c := newCluster(t, time.Second, 12)
	n1, n2 := c.start(1), c.start(2)
	nodes := []*testNode{n1, n2}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })

	// Two partitions broker 1 leads: one fails once, one always.
	var once, always TopicPartition
	found := 0
	for _, tp := range c.parts {
		if _, ok := n1.node.IsLeader(tp); ok {
			if found == 0 {
				once = tp
			} else {
				always = tp
			}
			if found++; found == 2 {
				break
			}
		}
	}
	if found < 2 {
		t.Fatalf("broker 1 leads fewer than 2 partitions")
	}
	failedOnce := false
	n1.rec.setFail(func(tp TopicPartition, epoch int32) error {
		switch {
		case tp == always:
			return errors.New("injected: always")
		case tp == once && !failedOnce:
			failedOnce = true
			return errors.New("injected: once")
		}
		return nil
	})
	e0 := map[TopicPartition]int32{}
	for _, tp := range []TopicPartition{once, always} {
		e0[tp], _ = n1.node.IsLeader(tp)
		n1.node.Relinquish(tp)
		if _, ok := n1.node.IsLeader(tp); ok {
			t.Fatalf("IsLeader(%v) right after Relinquish", tp)
		}
	}
	eventually(t, settle, "the failing partition taken by broker 2, the other back on 1", func() error {
		if err := c.check(nodes); err != nil {
			return err
		}
		if l, _ := n1.node.Leader(always); l.Broker != 2 {
			return fmt.Errorf("%v led by %d", always, l.Broker)
		}
		if l, _ := n1.node.Leader(once); l.Broker != 1 {
			return fmt.Errorf("%v led by %d", once, l.Broker)
		}
		return nil
	})
	if a := n1.rec.attempts(once); len(a) < 3 || a[len(a)-1] <= e0[once]+1 {
		t.Errorf("%v: Acquire epochs %v after %d; want a failed retry, then a newer epoch", once, a, e0[once])
	}
	if a := n1.rec.attempts(always); len(a) < 2 {
		t.Errorf("%v: Acquire epochs %v: want several attempts", always, a)
	}
	if _, fenced := n1.rec.releases(); fenced != 2 {
		t.Errorf("%d fenced releases, want 2 (one per Relinquish)", fenced)
	}
}

// TestRemovePartitions: partitions dropped from the set are released
// gracefully and their keys deleted.
func TestRemovePartitions(t *testing.T) {
	c := newCluster(t, 2*time.Second, 12)
	nodes := []*testNode{c.start(1), c.start(2)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	keep := c.parts[:5]
	for _, tn := range nodes {
		tn.node.SetPartitions(keep)
	}
	eventually(t, settle, "removed partitions released", func() error {
		kvs, err := c.obs.List(bg, leadersPrefix)
		if err != nil {
			return err
		}
		if len(kvs) != len(keep) {
			return fmt.Errorf("%d leader keys", len(kvs))
		}
		n := 0
		for _, tn := range nodes {
			n += tn.rec.count()
		}
		if n != len(keep) {
			return fmt.Errorf("handlers hold %d partitions", n)
		}
		for _, tn := range nodes {
			for _, tp := range c.parts[5:] {
				if _, ok := tn.node.Leader(tp); ok {
					return fmt.Errorf("broker %d still sees a leader for %v", tn.id, tp)
				}
			}
		}
		return nil
	})
	c.parts = keep
	if err := c.check(nodes); err != nil {
		t.Error(err)
	}
	for _, tn := range nodes {
		if _, fenced := tn.rec.releases(); fenced != 0 {
			t.Errorf("broker %d: %d fenced releases", tn.id, fenced)
		}
	}
}

// TestChanges: membership and leadership changes are signalled.
func TestChanges(t *testing.T) {
	c := newCluster(t, 2*time.Second, 2)
	n1 := c.start(1)
	eventually(t, settle, "every partition led", func() error { return c.check([]*testNode{n1}) })
	drain := func() {
		for {
			select {
			case <-n1.node.Changes():
			default:
				return
			}
		}
	}
	drain()
	c.start(2)
	select {
	case <-n1.node.Changes():
	case <-time.After(settle):
		t.Fatal("no change signalled for a joining broker")
	}
}

func TestUnsupportedStore(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Host, cfg.Port = "h", 9092
	_, err := Start(bg, struct{ meta.Store }{}, cfg, newRecorder(t, 0, nil))
	if !errors.Is(err, ErrUnsupportedStore) {
		t.Fatalf("Start over a store without leases = %v, want ErrUnsupportedStore", err)
	}
}

// TestAcquireOfDeletedPartition: an Acquire that finds the partition's
// topic deleted (ErrPartitionGone) gives the leadership up like any
// failure, but is logged as the expected race it is, not as a failure.
func TestAcquireOfDeletedPartition(t *testing.T) {
	c := newCluster(t, time.Second, 4)
	var buf bytes.Buffer
	var mu sync.Mutex
	c.log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	n1 := c.start(1)
	nodes := []*testNode{n1}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	gone := c.parts[0]
	failed := false
	n1.rec.setFail(func(tp TopicPartition, epoch int32) error {
		if tp == gone && !failed {
			failed = true
			return fmt.Errorf("%w: log: unknown topic or partition", ErrPartitionGone)
		}
		return nil
	})
	n1.node.Relinquish(gone)
	eventually(t, settle, "the partition led again", func() error { return c.settled(nodes) })
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if !strings.Contains(out, "partition deleted while its leadership was acquired") {
		t.Errorf("no info line for the deleted partition in:\n%s", out)
	}
	if strings.Contains(out, "level=WARN msg=\"Acquire failed") {
		t.Errorf("a deleted partition was logged as a failed Acquire:\n%s", out)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestSetTopic: topics added, grown and removed one at a time end in the
// same leaderships as the whole set would: every partition led once,
// spread as assign places them, the removed ones released.
func TestSetTopic(t *testing.T) {
	c := newCluster(t, 2*time.Second, 12) // orders 0-7, audit.log 0-3
	nodes := []*testNode{c.start(1), c.start(2)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	for _, tn := range nodes {
		tn.node.SetTopic("extra", 3, map[int32][]int32{0: {2}})
		tn.node.SetTopic("orders", 8, nil) // unchanged
	}
	for i := range 3 {
		c.parts = append(c.parts, TopicPartition{"extra", int32(i)})
	}
	eventually(t, settle, "the new topic led", func() error { return c.check(nodes) })
	eventually(t, settle, "its preferred partition on broker 2", func() error {
		if l, ok := nodes[0].node.Leader(TopicPartition{"extra", 0}); !ok || l.Broker != 2 {
			return fmt.Errorf("extra-0 led by %d, %v", l.Broker, ok)
		}
		return nil
	})
	for _, tn := range nodes {
		tn.node.SetTopic("audit.log", 0, nil)
	}
	var kept []TopicPartition
	for _, tp := range c.parts {
		if tp.Topic != "audit.log" {
			kept = append(kept, tp)
		}
	}
	eventually(t, settle, "the removed topic released", func() error {
		kvs, err := c.obs.List(bg, leadersPrefix+"audit.log/")
		if err != nil {
			return err
		}
		if len(kvs) != 0 {
			return fmt.Errorf("%d leader keys of audit.log", len(kvs))
		}
		return nil
	})
	c.parts = kept
	eventually(t, settle, "the rest settled", func() error { return c.check(nodes) })
}

// TestClaimPacing: a broker that must claim more partitions than its claim
// rate allows at once claims them in bursts, the rest waiting in
// sluice_cluster_claims_waiting, and ends up leading them all.
func TestClaimPacing(t *testing.T) {
	c := newCluster(t, 2*time.Second, 120)
	tn, err := c.tryStart(1, func(cfg *Config) { cfg.ClaimRate = 40 })
	if err != nil {
		t.Fatal(err)
	}
	var most float64
	eventually(t, settle, "every partition led", func() error {
		most = max(most, testutil.ToFloat64(tn.node.m.claimsWaiting))
		return c.check([]*testNode{tn})
	})
	if most == 0 {
		t.Errorf("120 claims at 40 a second (bursts of 40): none was seen waiting")
	}
	if w := testutil.ToFloat64(tn.node.m.claimsWaiting); w != 0 {
		t.Errorf("%v claims still waiting with every partition led", w)
	}
	t.Logf("at most %v claims seen waiting", most)
}
