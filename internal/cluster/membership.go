package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// session is one liveness session of the node: the lease behind its
// broker key and the controller key. Leader keys and the fence do not
// hang on it: they belong to the holding, which outlives sessions.
type session struct {
	s meta.Session
	// ctx ends when the session is lost or the node closes.
	ctx    context.Context
	cancel context.CancelFunc
}

// end cancels the session's work and revokes its lease (its keys go now).
func (s *session) end() error {
	s.cancel()
	return s.s.Close()
}

// holding is what the node's leaderships belong to: the id its leader
// keys and the epoch keys of its claims name, and its fence key
// cluster/fences/<id>, which is not on any lease. A broker key (on the
// liveness session) vouches for one holding. When the session ends the
// holding stays: the node registers a new session for it and serves on at
// the same epochs, unless another broker deposed the holding meanwhile by
// deleting its fence, which it may do only once no broker key has vouched
// for the holding for a while (planHolders). The id is that of the
// holding's first session, unique in etcd.
type holding struct {
	id  int64
	gen uint64
	// fence is the last version of the fence key known (n.mu): 0 until
	// registered, then 1, raised by claims of partitions the holding
	// gave up (FenceCompares).
	fence int64
	seen  bool // the watched view has shown the fence key (n.mu)
	// ctx ends when the holding is deposed or the node closes; Acquire
	// gets it.
	ctx    context.Context
	cancel context.CancelFunc
}

// errDeposed: registering found the holding's fence key gone. Another
// broker deposed it; every leadership of it is lost.
var errDeposed = errors.New("cluster: the holding was deposed (its fence key is gone)")

func (n *Node) newSession(ctx context.Context) (*session, error) {
	s, err := n.leaser.NewSession(ctx, n.cfg.LeaseTTL)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(n.ctx)
	return &session{s: s, ctx: sctx, cancel: cancel}, nil
}

func (n *Node) newHolding(id int64) *holding {
	n.mu.Lock()
	n.gen++
	gen := n.gen
	n.mu.Unlock()
	hctx, cancel := context.WithCancel(n.ctx)
	return &holding{id: id, gen: gen, ctx: hctx, cancel: cancel}
}

// register writes the broker key attached to s, vouching for h. The first
// registration of h also creates its fence key, detached from the
// session; later ones compare it, and fail with errDeposed if it is gone.
// A key left by one of our own earlier sessions (its lease not yet
// expired) is replaced; a key of another process is ErrBrokerIDInUse.
func (n *Node) register(ctx context.Context, s *session, h *holding) error {
	id := n.cfg.BrokerID
	key, fk := brokerKey(id), fenceKey(h.id)
	val := encode(brokerValue{ID: id, Host: n.cfg.Host, Port: n.cfg.Port, Rack: n.cfg.Rack, Endpoints: n.cfg.Endpoints,
		Session: s.s.ID(), Holder: h.id, Incarnation: n.incarnation})
	prev := n.cfg.PreviousSession
	// attempt registers over the broker key at brokerVer, deposing the
	// given holdings of dead processes of ours.
	attempt := func(brokerVer int64, depose ...int64) (int64, error) {
		n.mu.Lock()
		fv := h.fence
		n.mu.Unlock()
		ops := []meta.Op{meta.Put(key, val)}
		if fv == 0 {
			ops = append(ops, meta.PutDetached(fk, encodeFence(id)))
		}
		var gone []int64
		for _, d := range depose {
			if d != 0 && d != h.id && !slices.Contains(gone, d) {
				gone = append(gone, d)
				ops = append(ops, meta.Delete(fenceKey(d)))
			}
		}
		err := n.leaser.TxnWithSession(ctx, s.s, []meta.Compare{{Key: fk, Version: fv}, {Key: key, Version: brokerVer}}, ops...)
		if err == nil && fv == 0 {
			n.mu.Lock()
			h.fence = max(h.fence, 1)
			n.mu.Unlock()
		}
		return fv, err
	}
	for range 5 {
		// Our previous process's holding is dead (its data directory is
		// ours now): deposing it lets us claim its partitions at once.
		fv, err := attempt(0, prev)
		if err == nil {
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) {
			// If it was applied after all, the next attempt sees our
			// session in the key.
			return err
		}
		fkv, err := n.md.Get(ctx, fk)
		if err != nil && !errors.Is(err, meta.ErrNotFound) {
			return err
		}
		switch {
		case fv > 0 && fkv.Version == 0:
			return errDeposed
		case fkv.Version != fv:
			// Bumped by a claim of a partition we gave up, or created
			// by an attempt of ours whose answer was lost.
			n.mu.Lock()
			h.fence = max(h.fence, fkv.Version)
			n.mu.Unlock()
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
		if bv.Incarnation != n.incarnation && prev != 0 && (bv.Session == prev || bv.holder() == prev) {
			// Our previous process's registration: take the key over,
			// depose its holding and end its session, so that its
			// partitions wait for us rather than move elsewhere.
			if _, err := attempt(kv.Version, prev, bv.holder()); errors.Is(err, meta.ErrConflict) {
				continue
			} else if err != nil {
				return err
			}
			if err := n.leaser.RevokeSession(ctx, bv.Session); err != nil {
				n.log.Warn("ending the previous process's session failed; it expires by itself", "session", fmt.Sprintf("%x", bv.Session), "err", err)
			} else {
				n.log.Info("ended the session of this broker's previous process", "session", fmt.Sprintf("%x", bv.Session))
			}
			return nil
		}
		if bv.Incarnation != n.incarnation {
			return fmt.Errorf("%w: broker %d is registered by another process (advertising %s:%d, session %x)",
				ErrBrokerIDInUse, id, bv.Host, bv.Port, bv.Session)
		}
		if bv.Session == s.s.ID() && bv.holder() == h.id {
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

// join is Start's registration: a session, a holding and the broker key,
// waiting out a previous incarnation's lease and retrying an unavailable
// meta store for a while. It sets n.hold.
func (n *Node) join(ctx context.Context) (*session, error) {
	var cur *session
	var h *holding
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
		if err == nil && h == nil {
			h = n.newHolding(cur.s.ID())
		}
		if err == nil {
			if err = n.register(ctx, cur, h); err == nil {
				n.mu.Lock()
				n.hold = h
				n.mu.Unlock()
				return cur, nil
			}
		}
		pause := bo.next()
		switch {
		case errors.Is(err, errDeposed):
			// Deposed before it ever served: start over.
			cur.end()
			cur, h = nil, nil
			pause = 0
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
// or stalled for longer than the TTL, lease revoked), the node stops
// serving, keeps every partition, and registers a new session for its
// holding, with backoff, until Close. Only if the holding was deposed
// meanwhile are its partitions released (depose).
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
		if n.cur == cur {
			n.setCurLocked(nil, false)
		}
		n.mu.Unlock()
		cur.cancel()
		n.notify()
		n.log.Warn("cluster session ended; not serving until a new session vouches for our partitions", "session", fmt.Sprintf("%x", cur.s.ID()))
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

// depose forgets every tenure of h and releases them (fenced), all at
// once: another broker deposed h (deleted its fence), so none of its
// leaderships holds. It waits for the handler up to the lease TTL: a
// partition whose graceful Release is still flushing (against an
// unreachable store) must not keep the node from registering again; its
// fence completes in the background.
func (n *Node) depose(h *holding) {
	h.cancel()
	type lost struct {
		p *part
		t *tenure
	}
	n.mu.Lock()
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
	n.m.deposed.Inc()
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
		n.log.Warn("some partitions are still being released; registering meanwhile")
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

// rejoin starts a new session and registers it for the holding, retrying
// with backoff until it works or the node closes (nil). If the holding
// was deposed meanwhile, its partitions are released and a new holding is
// registered.
func (n *Node) rejoin() *session {
	bo := newBackoff(100*time.Millisecond, 2*time.Second)
	for {
		if n.ctx.Err() != nil {
			return nil
		}
		s, err := n.newSession(n.ctx)
		var h *holding
		fresh := false
		if err == nil {
			n.mu.Lock()
			h = n.hold
			fresh = h.fence == 0
			n.mu.Unlock()
			err = n.register(n.ctx, s, h)
			if errors.Is(err, errDeposed) {
				n.log.Warn("our holding was deposed while this broker had no session (its partitions were taken over); releasing every partition",
					"holding", fmt.Sprintf("%x", h.id))
				n.depose(h)
				h = n.newHolding(s.s.ID())
				n.mu.Lock()
				n.hold = h
				n.mu.Unlock()
				fresh = true
				err = n.register(n.ctx, s, h)
			}
			if err != nil {
				s.end()
			}
		}
		if err == nil {
			n.mu.Lock()
			ok := !n.closing
			if ok {
				n.setCurLocked(s, fresh)
			}
			n.mu.Unlock()
			if !ok {
				s.end()
				return nil
			}
			if fresh {
				n.announce(h)
				n.log.Info("rejoined the cluster with a new holding", "session", fmt.Sprintf("%x", s.s.ID()), "holding", fmt.Sprintf("%x", h.id))
			} else {
				n.m.resumed.Inc()
				n.log.Info("rejoined the cluster; serving our partitions again at the same epochs", "session", fmt.Sprintf("%x", s.s.ID()), "holding", fmt.Sprintf("%x", h.id))
			}
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

// fenceHolding deposes another broker's holding whose liveness ended
// (planHolders): it deletes the holding's fence key if the broker key is
// still as the view shows it (gone, or vouching for another holding), so
// that a registration of the holding racing this one leaves it alone.
// From then on every Txn under the holding's fence fails, it can never be
// registered again, and its leader keys are stale: each partition is
// claimed again (paced) by its desired owner.
func (n *Node) fenceHolding(a action) {
	err := n.md.Txn(n.ctx, []meta.Compare{{Key: brokerKey(a.broker), Version: a.brokerVer}}, meta.Delete(fenceKey(a.holder)))
	switch {
	case err == nil:
		n.m.fenced.Inc()
		n.log.Warn("deposed the holding of a broker whose liveness key is gone; its partitions are taken over",
			"of_broker", a.broker, "holding", fmt.Sprintf("%x", a.holder))
	case errors.Is(err, meta.ErrConflict), errors.Is(err, context.Canceled):
	default:
		n.log.Warn("deposing a dead broker's holding failed; retrying", "of_broker", a.broker, "err", err)
	}
}

// deregister marks our broker key leaving ahead of the hand-offs in Close,
// so that other brokers stop counting on us and take each partition the
// moment its key goes, while our holding stays vouched for (nobody deposes
// it in the middle of the hand-offs). Best effort: the lease revoke
// deletes the key anyway.
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
	bv.Leaving = true
	if err := n.leaser.TxnWithSession(ctx, cur.s, []meta.Compare{{Key: key, Version: kv.Version}}, meta.Put(key, encode(bv))); err != nil {
		n.log.Warn("deregistering failed; the lease revoke will", "err", err)
	}
}
