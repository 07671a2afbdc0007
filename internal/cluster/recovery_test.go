package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta/etcd"
	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

// TestEtcdRestart: etcd crashes and comes back after longer than the
// lease TTL while the brokers run. Each stops serving (LeaseValid,
// IsLeader false) once its lease's validity passes, but releases nothing;
// etcd extends every lease when it takes up leadership after the restart,
// so when it answers again every broker serves the same partitions at the
// same epochs, no handler having been called.
func TestEtcdRestart(t *testing.T) {
	c := newClusterOn(t, etcdtest.StartProcess(t), 2*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	before := c.leaders(nodes[0])

	c.srv.Kill(t)
	stopped := time.Now()
	eventually(t, settle, "every broker suspended", func() error {
		for _, tn := range nodes {
			if tn.node.LeaseValid() {
				return fmt.Errorf("broker %d's lease still valid", tn.id)
			}
			if _, ok := tn.node.IsLeader(c.parts[0]); ok {
				return fmt.Errorf("broker %d reports leadership", tn.id)
			}
		}
		return nil
	})
	time.Sleep(c.ttl + 500*time.Millisecond - time.Since(stopped)) // down longer than the TTL
	for _, tn := range nodes {
		if g, f := tn.rec.releases(); g+f != 0 {
			t.Errorf("broker %d released %d partitions (%d fenced) while etcd was down", tn.id, g+f, f)
		}
	}
	c.srv.Start(t)

	eventually(t, settle, "every partition led after the restart", func() error { return c.settled(nodes) })
	if after := c.leaders(nodes[0]); !mapsEqual(after, before) {
		t.Errorf("leadership moved across the restart:\nbefore %v\nafter  %v", before, after)
	}
	for _, tn := range nodes {
		if g, f := tn.rec.releases(); g+f != 0 {
			t.Errorf("broker %d released %d partitions (%d fenced)", tn.id, g+f, f)
		}
	}
}

func mapsEqual(a, b map[TopicPartition]Leadership) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestEtcdPause: etcd stops answering (SIGSTOP) for longer than the lease
// TTL. When it runs again it expires every lease: every broker's session
// ends. Each registers a new session for its holding and serves on: no
// partition moves, no epoch changes, no handler is called. The pause is
// repeated, to show a second stall is healed the same way.
func TestEtcdPause(t *testing.T) {
	c := newClusterOn(t, etcdtest.StartProcess(t), 2*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	before := c.leaders(nodes[0])

	for round := range 2 {
		sessions := c.sessions(nodes)
		c.srv.Pause(t)
		time.Sleep(c.ttl + time.Second)
		c.srv.Resume(t)
		eventually(t, settle, "every broker on a new session", func() error {
			now := c.sessions(nodes)
			for _, tn := range nodes {
				if now[tn.id] == 0 || now[tn.id] == sessions[tn.id] {
					return fmt.Errorf("round %d: broker %d's session %x, before the pause %x", round, tn.id, now[tn.id], sessions[tn.id])
				}
			}
			return nil
		})
		eventually(t, settle, "every partition led again", func() error { return c.settled(nodes) })
		if after := c.leaders(nodes[0]); !mapsEqual(after, before) {
			t.Errorf("round %d: leadership moved across the pause:\nbefore %v\nafter  %v", round, before, after)
		}
		for _, tn := range nodes {
			if g, f := tn.rec.releases(); g+f != 0 {
				t.Errorf("round %d: broker %d released %d partitions (%d fenced)", round, tn.id, g+f, f)
			}
		}
	}
}

// TestEtcdPauseDeadBroker: a broker dies while etcd is paused. When etcd
// runs again every session has expired; the two survivors register again
// and keep their partitions, and, their own leases having lapsed too, give
// the dead broker TakeoverGrace to come back before they depose its
// holding and take its partitions over.
func TestEtcdPauseDeadBroker(t *testing.T) {
	c := newClusterOn(t, etcdtest.StartProcess(t), 2*time.Second, 30)
	nodes := []*testNode{c.start(1), c.start(2), c.start(3)}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	before := c.leaders(nodes[0])

	c.srv.Pause(t)
	c.kill(nodes[2])
	time.Sleep(c.ttl + time.Second)
	c.srv.Resume(t)
	rest := nodes[:2]
	eventually(t, settle, "the dead broker's partitions taken over", func() error { return c.settled(rest) })
	after := c.leaders(nodes[0])
	for tp, l := range before {
		switch {
		case l.Broker == 3 && (after[tp].Broker == 3 || after[tp].Epoch <= l.Epoch):
			t.Errorf("%v: %+v before, %+v after", tp, l, after[tp])
		case l.Broker != 3 && after[tp] != l && !c.movedByBalance(tp, l, after[tp]):
			t.Errorf("%v: %+v before, %+v after: a survivor's partition moved", tp, l, after[tp])
		}
	}
	for _, tn := range rest {
		if _, f := tn.rec.releases(); f != 0 {
			t.Errorf("broker %d: %d partitions released fenced", tn.id, f)
		}
	}
}

// movedByBalance reports whether tp moving from one survivor to the other
// is the bounded-load placement over the two of them (a graceful hand-off
// after the third broker's partitions were placed), not a fence.
func (c *testCluster) movedByBalance(tp TopicPartition, was, now Leadership) bool {
	return now.Broker != 3 && now.Epoch > was.Epoch && assign(c.partSet(), nil, []int32{1, 2})[tp] == now.Broker
}

// sessions returns the session each node's broker key names (0: none).
func (c *testCluster) sessions(nodes []*testNode) map[int32]int64 {
	out := map[int32]int64{}
	for _, tn := range nodes {
		kv, err := c.obs.Get(bg, brokerKey(tn.id))
		var bv brokerValue
		if err == nil && json.Unmarshal(kv.Value, &bv) == nil {
			out[tn.id] = bv.Session
		}
	}
	return out
}

// TestStalledNodeFencesItself: one broker stops hearing from etcd with its
// connection still open, as when the broker is paused (a long GC, a VM
// stall): here a proxy between it and etcd holds every byte. It stops
// serving before its lease can expire in etcd, so at the moment another
// broker acquires one of its partitions it already answers IsLeader false.
// When the stall ends it learns its session is gone, rejoins and gets its
// share back, all at once.
func TestStalledNodeFencesItself(t *testing.T) {
	c := newCluster(t, 2*time.Second, 30)
	px := startProxy(t, c.srv.Endpoint())
	stalled := c.startVia(3, px.url())
	nodes := []*testNode{c.start(1), c.start(2), stalled}
	eventually(t, settle, "every partition led", func() error { return c.settled(nodes) })
	var mine []TopicPartition
	for _, tp := range c.parts {
		if _, ok := stalled.node.IsLeader(tp); ok {
			mine = append(mine, tp)
		}
	}
	var mu sync.Mutex
	var overlaps []string
	for _, tn := range nodes[:2] {
		tn.rec.setFail(func(tp TopicPartition, epoch int32) error {
			if _, ok := stalled.node.IsLeader(tp); ok || stalled.node.LeaseValid() {
				mu.Lock()
				overlaps = append(overlaps, fmt.Sprintf("%v acquired by broker %d at epoch %d while the stalled broker still serves", tp, tn.id, epoch))
				mu.Unlock()
			}
			return nil
		})
	}
	px.freeze()
	frozen := time.Now()
	eventually(t, settle, "the stalled broker's partitions taken over", func() error { return c.check(nodes[:2]) })
	t.Logf("%d partitions taken over %v after the stall began", len(mine), time.Since(frozen).Round(time.Millisecond))
	for _, tn := range nodes[:2] {
		tn.rec.setFail(nil)
	}
	mu.Lock()
	for _, o := range overlaps {
		t.Error(o)
	}
	mu.Unlock()
	if stalled.rec.count() != len(mine) {
		t.Errorf("the stalled broker's handler holds %d partitions, want its %d (it cannot tell yet)", stalled.rec.count(), len(mine))
	}

	px.thaw()
	eventually(t, settle, "the stalled broker's share back", func() error { return c.settled(nodes) })
}

// newClusterOn is newCluster over an etcd the test started.
func newClusterOn(t *testing.T, srv *etcdtest.Server, ttl time.Duration, nparts int) *testCluster {
	c := newCluster(t, ttl, nparts)
	c.srv = srv
	c.obs = c.openStore()
	return c
}

// startVia starts a node whose etcd connection goes to endpoint.
func (c *testCluster) startVia(id int32, endpoint string) *testNode {
	c.t.Helper()
	s, err := etcd.New(bg, etcd.Config{Endpoints: []string{endpoint}, Prefix: c.prefix,
		DialTimeout: 10 * time.Second, RequestTimeout: time.Second})
	if err != nil {
		c.t.Fatalf("etcd.New: %v", err)
	}
	c.t.Cleanup(func() { s.Close() })
	tn := &testNode{id: id, store: s}
	tn.rec = newRecorder(c.t, id, c.obs)
	n, err := Start(bg, s, c.config(id), tn.rec)
	if err != nil {
		c.t.Fatalf("Start broker %d: %v", id, err)
	}
	tn.node = n
	tn.rec.node.Store(n)
	c.t.Cleanup(func() { closeNode(c.t, tn) })
	n.SetPartitions(c.parts)
	return tn
}

// proxy forwards TCP connections to a target; freeze holds every byte in
// both directions, connections open, until thaw: to the client the other
// end is stalled, as a paused process is.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := target
	if i := len("http://"); len(u) > i && u[:i] == "http://" {
		u = u[i:]
	}
	p := &proxy{ln: ln, target: u}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { p.thaw(); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				conn.Close()
				continue
			}
			go p.pipe(up, conn)
			go p.pipe(conn, up)
		}
	}()
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

func (p *proxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *proxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
