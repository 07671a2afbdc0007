package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// The functions here run with p.op held.

// acquire claims tp (epoch, then leader key), calls Acquire, and on success
// makes the leadership visible to IsLeader.
func (n *Node) acquire(p *part, tp TopicPartition, fallback bool) {
	n.mu.Lock()
	cur, h := n.cur, n.hold
	_, led := n.view.liveLeader(tp)
	// A leader key of a deposed holding (its fence gone) is stale: the
	// claim replaces it.
	stale, keyed := n.view.leaders[tp]
	ok := cur != nil && h != nil && !n.closing && n.owned[tp] == nil && n.dropped[tp] == nil && n.wantsLocked(tp) && !led
	n.mu.Unlock()
	if !ok {
		return
	}
	if p.held != nil {
		// Should not happen: a held tenure is in owned or dropped, or a
		// fence for it is waiting for op.
		n.log.Error("not acquiring a partition the handler still holds", "topic", tp.Topic, "partition", tp.Partition)
		return
	}
	ctx := h.ctx
	lk, ek := leaderKey(tp), epochKey(tp)

	// The epoch key as the watch shows it: its compare makes sure it is
	// still that (a view that lags loses the race and tries again).
	n.mu.Lock()
	ev := n.view.epochs[tp]
	// The previous holding's fence, if the view still has it: the watch
	// shows it created before that holding's claim of this epoch, so a
	// fence missing from the view is gone for good (the holding ended).
	_, bump := n.view.fences[ev.session]
	bump = bump && ev.session != 0
	var floor int64
	switch {
	case ev.version == 0:
		floor = 1 // never led: nothing to see
	case ev.session != 0 && !bump:
		// The view is past the end of the previous holding, and so
		// past anything it registered.
		floor = max(n.view.rev, 1)
	}
	n.mu.Unlock()
	if ev.epoch == math.MaxInt32 {
		n.log.Error("leader epoch exhausted", "topic", tp.Topic, "partition", tp.Partition)
		return
	}
	next := ev.epoch + 1
	// Step 1: the epoch. It bumps the fence of the holding that claimed
	// the previous epoch, so that nothing that holding still registers
	// under its leadership lands after this claim (docs/cluster-keys.md,
	// "Fencing"), and deletes a stale leader key.
	var staleVer int64
	ops := []meta.Op{meta.Put(ek, encodeEpoch(next, h.id))}
	if keyed {
		staleVer = stale.version
		ops = append(ops, meta.Delete(lk))
	}
	cmps := []meta.Compare{{Key: lk, Version: staleVer}, {Key: ek, Version: ev.version}}
	base := ops
	if bump {
		ops = append(slices.Clip(ops), meta.Bump(fenceKey(ev.session)))
	}
	err := n.batch.Txn(ctx, cmps, ops...)
	if errors.Is(err, meta.ErrNotFound) && bump {
		// That holding has ended: its fence is gone, and with it every
		// compare on it.
		err = n.batch.Txn(ctx, cmps, base...)
	}
	if err != nil {
		n.pause(p, tp, "claiming an epoch", err)
		return
	}
	t := &tenure{tp: tp, epoch: next, epochVer: ev.version + 1, holder: h.id, gen: h.gen,
		since: n.now(), fallback: fallback, floor: floor}
	// Step 2: the leader key, only if nobody claimed a later epoch or
	// the leadership in between. It hangs on no lease: the holding's
	// fence, not the session, says whether it stands.
	err = n.batch.Txn(ctx, []meta.Compare{{Key: lk}, {Key: ek, Version: t.epochVer}},
		meta.Put(lk, encode(leaderValue{Broker: n.cfg.BrokerID, Epoch: next, Holder: t.holder})))
	if err != nil && meta.IsRetriable(err) && n.isOurs(ctx, t) {
		err = nil // applied although the answer was lost
	}
	if err != nil {
		n.pause(p, tp, "claiming the leadership", err)
		return
	}

	n.mu.Lock()
	ok = n.hold == h && !n.closing
	if ok {
		n.owned[tp] = t
		if lv, found := n.view.leaders[tp]; found && lv.Broker == n.cfg.BrokerID && lv.Epoch == next {
			t.seen = true
		}
	}
	n.mu.Unlock()
	if !ok {
		n.deleteLeader(n.ctx, t)
		return
	}
	log := n.log.With("topic", tp.Topic, "partition", tp.Partition, "epoch", next)
	log.Debug("acquiring", "fallback", fallback)

	if err := n.h.Acquire(ctx, tp, next); err != nil {
		n.mu.Lock()
		if n.owned[tp] == t {
			delete(n.owned, tp)
		}
		if n.dropped[tp] == t {
			delete(n.dropped, tp)
		}
		if ctx.Err() == nil {
			p.failures++
			p.notBefore = n.now().Add(failureBackoff(p.failures, n.cfg.LeaseTTL))
		}
		failures := p.failures
		n.mu.Unlock()
		if errors.Is(err, ErrPartitionGone) {
			log.Info("partition deleted while its leadership was acquired; giving the leadership up", "err", err)
		} else {
			log.Warn("Acquire failed; giving the leadership up", "err", err, "failures", failures)
		}
		n.deleteLeader(n.ctx, t)
		n.notify()
		return
	}
	n.mu.Lock()
	ok = n.owned[tp] == t
	if ok {
		t.ready = true
		p.failures = 0
	}
	n.mu.Unlock()
	if !ok {
		// Lost (session ended, relinquished) while loading.
		log.Warn("leadership lost during Acquire")
		n.h.Release(tp, true)
		return
	}
	p.held = t
	n.m.acquired.Inc()
	log.Info("leading", "fallback", fallback)
	n.notify()
}

// release hands t off gracefully: IsLeader turns false, the handler
// flushes (Release(false)) while FenceCompares still hold, then the key is
// deleted so that the next owner can claim it at once.
func (n *Node) release(ctx context.Context, p *part, t *tenure, why string) {
	if !n.releaseKeepingKey(p, t) {
		return
	}
	n.deleteLeader(ctx, t)
	n.forget(p, t)
	n.log.Info("released", "topic", t.tp.Topic, "partition", t.tp.Partition, "epoch", t.epoch, "why", why)
	n.notify()
}

// releaseKeepingKey is release up to the key's delete: false if t is no
// longer owned. Close uses it for every partition and then deposes the
// whole holding at once (its fence key), which makes every leader key
// left stale, claimable by the next owner as a deleted one is: one delete
// instead of one per partition, which at 50,000 partitions was most of a
// graceful stop (merged 40 to a transaction, one transaction at a time).
func (n *Node) releaseKeepingKey(p *part, t *tenure) bool {
	n.mu.Lock()
	ok := n.owned[t.tp] == t
	if ok {
		t.ready = false
	}
	n.mu.Unlock()
	if !ok {
		return false
	}
	n.notify()
	if p.held == t {
		n.h.Release(t.tp, false)
		p.held = nil
		n.m.released.Inc()
	}
	// From here FenceCompares no longer reports it: nothing registered
	// after this may count on the session's fence (the next claim bumps
	// it; a registration of ours that races the claim must fail).
	n.mu.Lock()
	t.ending = true
	n.mu.Unlock()
	return true
}

// forget drops t from the partitions owned, once its key is gone or stale.
func (n *Node) forget(p *part, t *tenure) {
	n.mu.Lock()
	if n.owned[t.tp] == t {
		delete(n.owned, t.tp)
	}
	p.notBefore = n.now().Add(settlePause)
	n.mu.Unlock()
}

// verify checks in the store whether t's key is still ours and, if not,
// fences it.
func (n *Node) verify(p *part, t *tenure) {
	n.mu.Lock()
	ok := n.owned[t.tp] == t
	n.mu.Unlock()
	if !ok {
		return
	}
	kv, err := n.md.Get(n.ctx, leaderKey(t.tp))
	if err == nil && kv.Version == leaderKeyVersion && n.matches(kv, t) {
		n.mu.Lock()
		p.notBefore = n.now().Add(verifyPause)
		n.mu.Unlock()
		return
	}
	if err != nil && !errors.Is(err, meta.ErrNotFound) {
		n.pause(p, t.tp, "checking the leadership", err)
		return
	}
	n.mu.Lock()
	ok = n.owned[t.tp] == t
	if ok {
		delete(n.owned, t.tp)
	}
	n.mu.Unlock()
	if !ok {
		return
	}
	n.log.Warn("leadership lost: leader key deleted or taken over", "topic", t.tp.Topic, "partition", t.tp.Partition, "epoch", t.epoch)
	if p.held == t {
		n.h.Release(t.tp, true)
		p.held = nil
		n.m.released.Inc()
	}
	n.notify()
}

// drop finishes a Relinquish: fenced release, then delete the key if it is
// still t's.
func (n *Node) drop(ctx context.Context, p *part, t *tenure) {
	n.mu.Lock()
	ok := n.dropped[t.tp] == t
	n.mu.Unlock()
	if !ok {
		return
	}
	if p.held == t {
		n.h.Release(t.tp, true)
		p.held = nil
		n.m.released.Inc()
	}
	n.deleteLeader(ctx, t)
	n.mu.Lock()
	if n.dropped[t.tp] == t {
		delete(n.dropped, t.tp)
	}
	p.notBefore = n.now().Add(settlePause)
	n.mu.Unlock()
}

// deleteOrphan deletes a leader key naming this broker's holding that no
// tenure holds: left by a claim whose answer was lost.
func (n *Node) deleteOrphan(p *part, tp TopicPartition) {
	n.mu.Lock()
	held := n.owned[tp] != nil || n.dropped[tp] != nil
	var self int64
	if n.hold != nil {
		self = n.hold.id
	}
	n.mu.Unlock()
	if held || self == 0 {
		return
	}
	lk, ek := leaderKey(tp), epochKey(tp)
	kv, err := n.md.Get(n.ctx, lk)
	if errors.Is(err, meta.ErrNotFound) {
		n.mu.Lock()
		p.notBefore = n.now().Add(settlePause)
		n.mu.Unlock()
		return
	}
	if err != nil {
		n.pause(p, tp, "reading a leader key", err)
		return
	}
	var lv leaderValue
	if json.Unmarshal(kv.Value, &lv) != nil || lv.Broker != n.cfg.BrokerID || lv.holder() != self {
		return
	}
	ekv, err := n.md.Get(n.ctx, ek)
	if err != nil {
		n.pause(p, tp, "reading the epoch", err)
		return
	}
	// The epoch counter does not move while a leader key exists, so it
	// names this key's epoch; comparing it too makes sure we delete this
	// key and not one created since.
	if e, _, err := decodeEpoch(ekv); err != nil || e != lv.Epoch {
		n.pause(p, tp, "matching the epoch", errors.New("the epoch key does not match the leader key"))
		return
	}
	err = n.md.Txn(n.ctx, []meta.Compare{{Key: lk, Version: kv.Version}, {Key: ek, Version: ekv.Version}}, meta.Delete(lk))
	switch {
	case err == nil:
		n.log.Info("deleted a leader key of ours that no leadership holds", "topic", tp.Topic, "partition", tp.Partition, "epoch", lv.Epoch)
		n.mu.Lock()
		p.notBefore = n.now().Add(settlePause)
		n.mu.Unlock()
	case !errors.Is(err, meta.ErrConflict):
		n.pause(p, tp, "deleting a leader key", err)
	}
}

// deleteLeader deletes t's leader key if it is still t's, retrying a
// little; what it cannot delete goes with the session, or as an orphan.
func (n *Node) deleteLeader(ctx context.Context, t *tenure) {
	for attempt := range 3 {
		err := n.batch.Txn(ctx, t.compares(), meta.Delete(leaderKey(t.tp)))
		if err == nil || errors.Is(err, meta.ErrConflict) {
			return
		}
		if !meta.IsRetriable(err) || ctx.Err() != nil {
			n.log.Warn("deleting a leader key failed", "topic", t.tp.Topic, "partition", t.tp.Partition, "err", err)
			return
		}
		if !sleep(ctx, 100*time.Millisecond<<attempt) {
			return
		}
	}
	n.log.Warn("deleting a leader key failed; it goes with the session", "topic", t.tp.Topic, "partition", t.tp.Partition)
}

// isOurs reads t's leader key back (after an ambiguous claim).
func (n *Node) isOurs(ctx context.Context, t *tenure) bool {
	kv, err := n.md.Get(ctx, leaderKey(t.tp))
	return err == nil && kv.Version == leaderKeyVersion && n.matches(kv, t)
}

func (n *Node) matches(kv meta.KV, t *tenure) bool {
	var lv leaderValue
	return json.Unmarshal(kv.Value, &lv) == nil &&
		lv.Broker == n.cfg.BrokerID && lv.Epoch == t.epoch && lv.holder() == t.holder
}

// deleteStale deletes the leader key of a partition that is no longer in
// the partition set and whose holding was deposed (a deleted topic whose
// leader died): nobody claims it, so nobody would replace the key.
func (n *Node) deleteStale(p *part, tp TopicPartition) {
	n.mu.Lock()
	lv, keyed := n.view.leaders[tp]
	_, led := n.view.liveLeader(tp)
	ev := n.view.epochs[tp]
	ok := keyed && !led && !n.wantsLocked(tp)
	n.mu.Unlock()
	if !ok {
		return
	}
	// The epoch key does not move while a leader key exists: comparing
	// it too makes sure this is the stale key, not one created since.
	err := n.batch.Txn(n.ctx, []meta.Compare{{Key: leaderKey(tp), Version: lv.version}, {Key: epochKey(tp), Version: ev.version}},
		meta.Delete(leaderKey(tp)))
	if err != nil && !errors.Is(err, meta.ErrConflict) {
		n.pause(p, tp, "deleting a stale leader key", err)
		return
	}
	n.mu.Lock()
	p.notBefore = n.now().Add(settlePause)
	n.mu.Unlock()
}

// pause delays the partition's next action after a failed step: briefly
// after a lost race, longer (with a warning) after a store error.
func (n *Node) pause(p *part, tp TopicPartition, what string, err error) {
	d := errorPause
	switch {
	case errors.Is(err, meta.ErrConflict):
		d = conflictPause
	case errors.Is(err, meta.ErrSessionDone), errors.Is(err, context.Canceled):
		// The holding was deposed or the node is closing: the session
		// loop takes over, and the next holding may try at once.
		return
	default:
		n.log.Warn("cluster step failed; retrying later", "step", what, "topic", tp.Topic, "partition", tp.Partition, "err", err)
	}
	n.mu.Lock()
	p.notBefore = n.now().Add(d)
	n.mu.Unlock()
}
