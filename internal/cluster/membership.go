package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// session is one meta session of the node: the lease behind its broker
// key, its leader keys and the controller key.
type session struct {
	s   meta.Session
	gen uint64
	// fence is the last version of the session's fence key known (n.mu):
	// 1 when registered, raised by claims of its partitions
	// (FenceCompares).
	fence int64
	// ctx ends when the session is lost or the node closes; Acquire gets it.
	ctx    context.Context
	cancel context.CancelFunc
}

// end cancels the session's work and revokes its lease (its keys go now).
func (s *session) end() error {
	s.cancel()
	return s.s.Close()
}

func (n *Node) newSession(ctx context.Context) (*session, error) {
	s, err := n.leaser.NewSession(ctx, n.cfg.LeaseTTL)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.gen++
	gen := n.gen
	n.mu.Unlock()
	sctx, cancel := context.WithCancel(n.ctx)
	return &session{s: s, gen: gen, ctx: sctx, cancel: cancel}, nil
}

// register writes the broker key attached to s. A key left by one of our
// own earlier sessions (its lease not yet expired) is replaced; a key of
// another process is ErrBrokerIDInUse.
func (n *Node) register(ctx context.Context, s *session) error {
	id := n.cfg.BrokerID
	key := brokerKey(id)
	val := encode(brokerValue{ID: id, Host: n.cfg.Host, Port: n.cfg.Port, Rack: n.cfg.Rack, Endpoints: n.cfg.Endpoints,
		Session: s.s.ID(), Incarnation: n.incarnation})
	// The fence key is created with the registration, on the session:
	// every leadership of the session compares it (FenceCompares).
	fence := meta.Put(fenceKey(s.s.ID()), nil)
	s.fence = 1
	for range 5 {
		err := n.leaser.TxnWithSession(ctx, s.s, []meta.Compare{{Key: key}, {Key: fenceKey(s.s.ID())}}, meta.Put(key, val), fence)
		if err == nil {
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) {
			// If it was applied after all, the next attempt sees our
			// session in the key.
			return err
		}
		kv, err := n.md.Get(ctx, key)
		if errors.Is(err, meta.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var bv brokerValue
		if err := json.Unmarshal(kv.Value, &bv); err != nil {
			return fmt.Errorf("%w: broker %d: unreadable registration %q", ErrBrokerIDInUse, id, kv.Value)
		}
		if bv.Incarnation != n.incarnation && n.cfg.PreviousSession != 0 && bv.Session == n.cfg.PreviousSession {
			// Our previous process's registration (it is dead: its data
			// directory is ours now). Take the key over, then end its
			// session: its leader keys go now, and the watch shows
			// them gone with this broker still a member, so their
			// partitions wait for us rather than move elsewhere.
			err := n.leaser.TxnWithSession(ctx, s.s, []meta.Compare{{Key: key, Version: kv.Version}, {Key: fenceKey(s.s.ID())}}, meta.Put(key, val), fence)
			if errors.Is(err, meta.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			if err := n.leaser.RevokeSession(ctx, bv.Session); err != nil {
				n.log.Warn("ending the previous process's session failed; its keys expire with it", "session", fmt.Sprintf("%x", bv.Session), "err", err)
			} else {
				n.log.Info("ended the session of this broker's previous process", "session", fmt.Sprintf("%x", bv.Session))
			}
			return nil
		}
		if bv.Incarnation != n.incarnation {
			return fmt.Errorf("%w: broker %d is registered by another process (advertising %s:%d, session %x)",
				ErrBrokerIDInUse, id, bv.Host, bv.Port, bv.Session)
		}
		if bv.Session == s.s.ID() {
			return nil
		}
		err = n.md.Txn(ctx, []meta.Compare{{Key: key, Version: kv.Version}}, meta.Delete(key))
		if err != nil && !errors.Is(err, meta.ErrConflict) {
			return err
		}
		n.log.Info("replaced the registration of an earlier session", "session", fmt.Sprintf("%x", bv.Session))
	}
	return fmt.Errorf("cluster: registering broker %d: key %q keeps changing", id, key)
}

// join is Start's registration: a session and the broker key, waiting out
// a previous incarnation's lease and retrying an unavailable meta store for
// a while.
func (n *Node) join(ctx context.Context) (*session, error) {
	var cur *session
	var inUseSince time.Time
	giveUp := time.Now().Add(max(10*time.Second, 2*n.cfg.LeaseTTL))
	bo := newBackoff(100*time.Millisecond, time.Second)
	for {
		var err error
		if cur != nil && isClosed(cur.s.Done()) {
			cur.end()
			cur = nil
		}
		if cur == nil {
			cur, err = n.newSession(ctx)
		}
		if err == nil {
			if err = n.register(ctx, cur); err == nil {
				return cur, nil
			}
		}
		pause := bo.next()
		switch {
		case errors.Is(err, ErrBrokerIDInUse):
			// Waiting real time, not n.now: this sleeps.
			wait := max(n.cfg.LeaseTTL, cur.s.TTL()) + time.Second
			if inUseSince.IsZero() {
				inUseSince = time.Now()
				n.log.Info("broker id is registered; waiting for a previous incarnation's lease to expire",
					"wait", wait, "err", err)
			}
			if time.Since(inUseSince) > wait {
				cur.end()
				return nil, err
			}
			pause = 100 * time.Millisecond
		case meta.IsRetriable(err) && time.Now().Before(giveUp):
			n.log.Warn("joining the cluster: meta store unavailable; retrying", "err", err, "backoff", pause)
		default:
			if cur != nil {
				cur.end()
			}
			return nil, fmt.Errorf("cluster: joining as broker %d: %w", n.cfg.BrokerID, err)
		}
		if !sleep(ctx, pause) {
			if cur != nil {
				cur.end()
			}
			return nil, fmt.Errorf("cluster: joining as broker %d: %w (last error: %v)", n.cfg.BrokerID, ctx.Err(), err)
		}
	}
}

// sessionLoop watches the current session. When it ends (etcd unreachable
// for longer than the TTL, lease revoked), every partition is fenced at
// once, then a new session is started and registered, with backoff, until
// Close.
func (n *Node) sessionLoop(cur *session) {
	defer n.loopWG.Done()
	for {
		select {
		case <-cur.s.Done():
		case <-n.ctx.Done():
			return
		}
		n.mu.Lock()
		closing := n.closing
		n.mu.Unlock()
		n.log.Warn("cluster session ended; releasing every partition (fenced)", "session", fmt.Sprintf("%x", cur.s.ID()))
		n.lose(cur)
		// Revoking deletes the keys at once if etcd answers; otherwise
		// they expire with the lease.
		n.loopWG.Add(1)
		go func() {
			defer n.loopWG.Done()
			cur.s.Close()
		}()
		if closing {
			return
		}
		if cur = n.rejoin(); cur == nil {
			return
		}
	}
}

// lose forgets every tenure of cur and releases them (fenced), all at
// once. It waits for the handler up to the lease TTL: a partition whose
// graceful Release is still flushing (against an unreachable store) must not
// keep the node from rejoining; its fence completes in the background.
func (n *Node) lose(cur *session) {
	cur.cancel()
	type lost struct {
		p *part
		t *tenure
	}
	n.mu.Lock()
	if n.cur == cur {
		n.setCurLocked(nil)
	}
	var ls []lost
	n.prevHeld = map[TopicPartition]bool{}
	for tp, t := range n.owned {
		ls = append(ls, lost{n.partLocked(tp), t})
		delete(n.owned, tp)
		n.prevHeld[tp] = true
	}
	for tp, t := range n.dropped {
		ls = append(ls, lost{n.partLocked(tp), t})
		delete(n.dropped, tp)
		n.prevHeld[tp] = true
	}
	n.mu.Unlock()
	n.notify()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		n.loopWG.Add(1) // the session loop holds one: never from zero
		go func() {
			defer n.loopWG.Done()
			defer wg.Done()
			n.fence(l.p, l.t)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.LeaseTTL)
	defer cancel()
	if err := waitCtx(ctx, &wg); err != nil {
		n.log.Warn("some partitions are still being released; rejoining meanwhile")
	}
}

// fence tells the handler that t is lost, if it holds it. A tenure whose
// Acquire is still running is released by the acquisition itself.
func (n *Node) fence(p *part, t *tenure) {
	p.op.Lock()
	defer p.op.Unlock()
	if p.held == t {
		n.h.Release(t.tp, true)
		p.held = nil
		n.m.released.Inc()
	}
}

// rejoin starts and registers a new session, retrying with backoff until
// it works or the node closes (nil).
func (n *Node) rejoin() *session {
	bo := newBackoff(100*time.Millisecond, 2*time.Second)
	for {
		if n.ctx.Err() != nil {
			return nil
		}
		s, err := n.newSession(n.ctx)
		if err == nil {
			if err = n.register(n.ctx, s); err != nil {
				s.end()
			}
		}
		if err == nil {
			n.mu.Lock()
			ok := !n.closing
			if ok {
				n.setCurLocked(s)
			}
			n.mu.Unlock()
			if !ok {
				s.end()
				return nil
			}
			n.announce(s)
			n.log.Info("rejoined the cluster", "session", fmt.Sprintf("%x", s.s.ID()))
			n.notify()
			n.kick()
			return s
		}
		if n.ctx.Err() != nil {
			return nil
		}
		d := bo.next()
		level := slog.LevelWarn
		if errors.Is(err, ErrBrokerIDInUse) {
			level = slog.LevelError
		}
		n.log.Log(n.ctx, level, "rejoining the cluster failed; retrying", "err", err, "backoff", d)
		if !sleep(n.ctx, d) {
			return nil
		}
	}
}

// deregister deletes our broker key ahead of the hand-offs in Close, so
// that other brokers stop counting on us and take each partition the moment
// its key goes. Best effort: the lease revoke deletes it anyway.
func (n *Node) deregister(ctx context.Context) {
	n.mu.Lock()
	cur := n.cur
	n.mu.Unlock()
	if cur == nil {
		return
	}
	key := brokerKey(n.cfg.BrokerID)
	kv, err := n.md.Get(ctx, key)
	if err != nil {
		return
	}
	var bv brokerValue
	if json.Unmarshal(kv.Value, &bv) != nil || bv.Incarnation != n.incarnation || bv.Session != cur.s.ID() {
		return
	}
	if err := n.md.Txn(ctx, []meta.Compare{{Key: key, Version: kv.Version}}, meta.Delete(key)); err != nil {
		n.log.Warn("deregistering failed; the lease revoke will", "err", err)
	}
}
