package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// view is the cluster as the watch on cluster/ shows it. It may lag the
// store; every decision taken on it is checked again by a compare.
type view struct {
	synced  bool
	rev     int64            // the store revision the view is at (its last event or snapshot)
	members map[int32]member // registered brokers, but for those leaving
	regs    map[int32]reg    // every broker key, leaving or not
	leaders map[TopicPartition]leaderView
	epochs  map[TopicPartition]epochView
	fences  map[int64]int32 // holdings whose fence key exists: their broker (-1 if unknown)
	ctrl    *controllerView
}

// epochView is an epoch key: what a claim compares and writes without
// reading it first.
type epochView struct {
	epoch   int32
	version int64
	session int64 // the holding that claimed epoch; 0 if unknown
}

type member struct {
	Broker
	session int64
	// since is when this node first saw the member; zero if it was there
	// when the node started (RebalanceDelay has passed for it).
	since time.Time
}

// reg is a broker key: which holding it vouches for, at which version.
type reg struct {
	holder  int64
	version int64
	leaving bool
}

type leaderView struct {
	Leadership
	holder  int64
	version int64
}

type controllerView struct {
	broker  int32
	session int64
}

func newView() view {
	return view{members: map[int32]member{}, regs: map[int32]reg{}, leaders: map[TopicPartition]leaderView{},
		epochs: map[TopicPartition]epochView{}, fences: map[int64]int32{}}
}

// liveLeader is tp's leader key if its holding still stands (its fence
// exists). A key whose holding was deposed (fence deleted) is stale: the
// partition is leaderless and its next claim replaces the key.
func (v *view) liveLeader(tp TopicPartition) (leaderView, bool) {
	lv, ok := v.leaders[tp]
	if !ok {
		return lv, false
	}
	if _, fenced := v.fences[lv.holder]; !fenced && lv.holder != 0 {
		return lv, false
	}
	return lv, true
}

// holderLive reports whether a broker key vouches for holding h.
func (v *view) holderLive(h int64) bool {
	for _, r := range v.regs {
		if r.holder == h {
			return true
		}
	}
	return false
}

// firstWatch is Start's watch: retried a while if the store is unavailable.
func (n *Node) firstWatch(ctx context.Context) ([]meta.KV, int64, <-chan meta.WatchEvent, error) {
	giveUp := time.Now().Add(max(10*time.Second, 2*n.cfg.LeaseTTL))
	bo := newBackoff(100*time.Millisecond, time.Second)
	for {
		// The watch lives as long as the node, not as Start's ctx.
		snap, rev, events, err := n.watcher.Watch(n.ctx, clusterPrefix)
		if err == nil {
			return snap, rev, events, nil
		}
		if !meta.IsRetriable(err) || time.Now().After(giveUp) {
			return nil, 0, nil, err
		}
		d := bo.next()
		n.log.Warn("watching the cluster: meta store unavailable; retrying", "err", err, "backoff", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, 0, nil, ctx.Err()
		}
	}
}

// watchLoop applies events; when the watch breaks it watches again from a
// fresh snapshot, with backoff, until the node closes.
func (n *Node) watchLoop(events <-chan meta.WatchEvent) {
	defer n.loopWG.Done()
	bo := newBackoff(100*time.Millisecond, 2*time.Second)
	for {
		began := time.Now()
		err := n.consume(events)
		if n.ctx.Err() != nil {
			return
		}
		if time.Since(began) > 10*time.Second {
			bo.reset()
		}
		n.log.Warn("cluster watch broke; watching again", "err", err)
		for {
			if !sleep(n.ctx, bo.next()) {
				return
			}
			snap, rev, ch, err := n.watcher.Watch(n.ctx, clusterPrefix)
			if err != nil {
				if n.ctx.Err() != nil {
					return
				}
				n.log.Warn("cluster watch failed; retrying", "err", err)
				continue
			}
			n.applySnapshot(snap, rev, false)
			events = ch
			break
		}
	}
}

// consume applies events until the channel ends; the error event's error,
// if any.
func (n *Node) consume(events <-chan meta.WatchEvent) error {
	for ev := range events {
		if ev.Err != nil {
			return ev.Err
		}
		n.mu.Lock()
		n.view.rev = max(n.view.rev, ev.Revision)
		if ev.Kind == meta.WatchDelete {
			n.applyDeleteLocked(ev.Key)
		} else {
			n.applyPutLocked(ev.Key, ev.Value, ev.Version, n.now(), n.view.members, false)
		}
		switch {
		case strings.HasPrefix(ev.Key, epochsPrefix) && ev.Kind == meta.WatchPut:
			if tp, ok := parseEpochKey(ev.Key); ok && n.view.epochs[tp].session != 0 {
				n.lastClaim[n.view.epochs[tp].session] = n.now() // a claim by that holding (fallbackAt)
			}
		case strings.HasPrefix(ev.Key, leadersPrefix):
			if tp, ok := parseLeaderKey(ev.Key); ok {
				n.markDirty(tp)
			}
		case strings.HasPrefix(ev.Key, brokersPrefix):
			n.fullPass = true
		case strings.HasPrefix(ev.Key, fencesPrefix) && ev.Kind == meta.WatchDelete:
			// A deposed holding: its leader keys are stale now.
			n.fullPass = true
		}
		n.mu.Unlock()
		if !strings.HasPrefix(ev.Key, epochsPrefix) {
			n.notify()
			n.kick()
		}
	}
	return nil
}

// applySnapshot replaces the view. Members seen before keep their since.
func (n *Node) applySnapshot(kvs []meta.KV, rev int64, initial bool) {
	n.mu.Lock()
	now := n.now()
	prev := n.view.members
	for tp, lv := range n.view.leaders {
		n.lastLeader[tp] = lv.Broker // gone unless the snapshot has it again
	}
	n.view = newView()
	for _, kv := range kvs {
		n.applyPutLocked(kv.Key, kv.Value, kv.Version, now, prev, initial)
	}
	n.view.synced = true
	n.view.rev = rev
	if h := n.hold; h != nil && h.seen && !n.closing {
		if _, ok := n.view.fences[h.id]; !ok {
			n.fenceLost = true
		}
	}
	n.fullPass = true
	n.mu.Unlock()
	n.notify()
	n.kick()
}

func (n *Node) applyPutLocked(key string, value []byte, version int64, now time.Time, prev map[int32]member, initial bool) {
	switch {
	case strings.HasPrefix(key, epochsPrefix):
		tp, ok := parseEpochKey(key)
		e, s, err := decodeEpoch(meta.KV{Key: key, Value: value})
		if !ok || err != nil {
			n.log.Warn("ignoring a malformed epoch key", "key", key, "value", string(value))
			return
		}
		n.view.epochs[tp] = epochView{epoch: e, version: version, session: s}
	case strings.HasPrefix(key, fencesPrefix):
		if s, ok := parseFenceKey(key); ok {
			n.view.fences[s] = decodeFence(value)
		}
		if n.hold != nil && key == fenceKey(n.hold.id) {
			n.hold.fence = max(n.hold.fence, version)
			n.hold.seen = true
		}
	case strings.HasPrefix(key, brokersPrefix):
		id, ok := parseBrokerKey(key)
		var bv brokerValue
		if !ok || json.Unmarshal(value, &bv) != nil {
			n.log.Warn("ignoring a malformed broker key", "key", key, "value", string(value))
			return
		}
		n.view.regs[id] = reg{holder: bv.holder(), version: version, leaving: bv.Leaving}
		if bv.Leaving {
			delete(n.view.members, id)
			return
		}
		m := member{Broker: Broker{ID: id, Host: bv.Host, Port: bv.Port, Rack: bv.Rack, Endpoints: bv.Endpoints}, session: bv.Session}
		_, standing := n.view.fences[bv.holder()]
		switch old, ok := prev[id]; {
		case ok:
			m.since = old.since
		case standing:
			// Registering again for a holding that stood meanwhile:
			// it never stopped being a member for placement.
		case !initial:
			m.since = now
		}
		n.view.members[id] = m
	case strings.HasPrefix(key, leadersPrefix):
		tp, ok := parseLeaderKey(key)
		var lv leaderValue
		if !ok || json.Unmarshal(value, &lv) != nil {
			n.log.Warn("ignoring a malformed leader key", "key", key, "value", string(value))
			return
		}
		n.view.leaders[tp] = leaderView{Leadership: Leadership{Broker: lv.Broker, Epoch: lv.Epoch}, holder: lv.holder(), version: version}
		if t := n.owned[tp]; t != nil && lv.Broker == n.cfg.BrokerID && lv.Epoch == t.epoch {
			t.seen = true
		}
	case key == controllerKey:
		var cv controllerValue
		if json.Unmarshal(value, &cv) != nil {
			n.log.Warn("ignoring a malformed controller key", "value", string(value))
			return
		}
		n.view.ctrl = &controllerView{broker: cv.Broker, session: cv.Session}
	}
}

func (n *Node) applyDeleteLocked(key string) {
	switch {
	case strings.HasPrefix(key, epochsPrefix):
		if tp, ok := parseEpochKey(key); ok {
			delete(n.view.epochs, tp)
		}
	case strings.HasPrefix(key, fencesPrefix):
		if s, ok := parseFenceKey(key); ok {
			delete(n.view.fences, s)
			if n.hold != nil && n.hold.id == s && n.hold.seen && !n.closing {
				n.fenceLost = true
			}
		}
	case strings.HasPrefix(key, brokersPrefix):
		if id, ok := parseBrokerKey(key); ok {
			delete(n.view.members, id)
			delete(n.view.regs, id)
		}
	case strings.HasPrefix(key, leadersPrefix):
		if tp, ok := parseLeaderKey(key); ok {
			if lv, ok := n.view.leaders[tp]; ok {
				n.lastLeader[tp] = lv.Broker
			}
			delete(n.view.leaders, tp)
		}
	case key == controllerKey:
		n.view.ctrl = nil
	}
}
