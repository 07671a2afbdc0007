package cluster

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Planning compares the watched view with what this node holds and decides
// what to do, partition by partition. With 100,000 partitions a pass over
// all of them costs tens of milliseconds, so passes are incremental: each
// looks only at the partitions something happened to (dirty: a leader key
// changed, an action finished, the partition set changed) and those whose
// own timer is due (recheck: a pause after a failure, the fallback delay of
// a leaderless partition, a fallback leadership's hold). A full pass runs
// when something that concerns every partition changes (membership, a new
// session, a fresh view), when a member becomes eligible for hand-offs or
// the join settle ends, and periodically as a safety net, at most 1% of
// the time.

// minFullEvery is the least time between periodic full passes.
const minFullEvery = 5 * time.Second

// placement is the desired leaders of the partitions a node wants over one
// set of brokers, computed per topic on first use and cached until the
// topic's partitions change (Node.assigned).
type placement struct {
	n       *Node
	brokers []int32
	byTopic map[string]map[int32]int32
}

// owner is tp's desired leader: its place in its topic's bounded-load
// assignment, or plain rendezvous for a partition outside the wanted set.
// n.mu is held.
func (pl placement) owner(tp TopicPartition) int32 {
	m, ok := pl.byTopic[tp.Topic]
	if !ok {
		parts := pl.n.wantTopics[tp.Topic]
		if len(parts) == 0 {
			return owner(tp, pl.brokers)
		}
		m = assignTopic(tp.Topic, parts, pl.n.prefer, pl.brokers)
		pl.byTopic[tp.Topic] = m
	}
	if b, ok := m[tp.Partition]; ok {
		return b
	}
	return owner(tp, pl.brokers)
}

// placementLocked is the placement over brokers, its per-topic cache kept
// per broker set (a few at most: the live and the eligible set). n.mu is
// held.
func (n *Node) placementLocked(brokers []int32) placement {
	ids := slices.Clone(brokers)
	slices.Sort(ids)
	var key strings.Builder
	for _, id := range ids {
		key.WriteString(strconv.Itoa(int(id)))
		key.WriteByte(',')
	}
	byTopic, ok := n.assigned[key.String()]
	if !ok {
		if len(n.assigned) >= 4 {
			clear(n.assigned)
		}
		byTopic = map[string]map[int32]int32{}
		n.assigned[key.String()] = byTopic
	}
	return placement{n: n, brokers: ids, byTopic: byTopic}
}

// SetPartitionsPreferred is SetPartitions with preferred replica lists for
// some of the partitions: each is led by the first of its list that is a
// live broker (Kafka's preferred leader), the others are balanced. Only
// the topics whose partitions or preferred lists changed are planned
// again, so a broker with 100,000 partitions pays for a topic created or
// deleted only that topic's partitions (plus building the sets). The node
// keeps prefer (SetTopic changes it): the caller must not use it again.
func (n *Node) SetPartitionsPreferred(tps []TopicPartition, prefer map[TopicPartition][]int32) {
	want := make(map[TopicPartition]struct{}, len(tps))
	topics := map[string][]int32{}
	for _, tp := range tps {
		want[tp] = struct{}{}
		topics[tp.Topic] = append(topics[tp.Topic], tp.Partition)
	}
	for _, parts := range topics {
		slices.Sort(parts)
	}
	n.mu.Lock()
	var changed []string
	for topic, parts := range topics {
		if !slices.Equal(n.wantTopics[topic], parts) || !samePrefer(topic, parts, n.prefer, prefer) {
			changed = append(changed, topic)
		}
	}
	for topic, parts := range n.wantTopics {
		if _, ok := topics[topic]; !ok {
			changed = append(changed, topic)
		} else if !samePrefer(topic, parts, n.prefer, prefer) && !slices.Contains(changed, topic) {
			changed = append(changed, topic)
		}
	}
	for _, topic := range changed {
		for _, parts := range [][]int32{n.wantTopics[topic], topics[topic]} {
			for _, p := range parts {
				tp := TopicPartition{Topic: topic, Partition: p}
				n.dirty[tp] = struct{}{}
				if _, ok := want[tp]; !ok {
					if pt := n.parts[tp]; pt != nil {
						pt.leaderlessSince = time.Time{}
					}
				}
			}
		}
		for _, byTopic := range n.assigned {
			delete(byTopic, topic)
		}
	}
	n.want, n.prefer, n.wantTopics = want, prefer, topics
	n.mu.Unlock()
	if len(changed) > 0 {
		n.kick()
	}
}

// SetTopic changes one topic's part of the partition set: its partitions
// 0..partitions-1 (0: the topic is gone), with preferred replica lists by
// partition for some of them. It costs that topic's partitions, so a
// broker told of each topic created or deleted among 10,000 stays linear.
func (n *Node) SetTopic(topic string, partitions int32, prefer map[int32][]int32) {
	n.mu.Lock()
	old := n.wantTopics[topic]
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	changed := !slices.Equal(old, parts)
	for _, p := range parts {
		tp := TopicPartition{Topic: topic, Partition: p}
		if !slices.Equal(n.prefer[tp], prefer[p]) {
			changed = true
		}
	}
	if !changed {
		n.mu.Unlock()
		return
	}
	if n.prefer == nil {
		n.prefer = map[TopicPartition][]int32{}
	}
	for _, p := range old {
		tp := TopicPartition{Topic: topic, Partition: p}
		delete(n.want, tp)
		delete(n.prefer, tp)
		n.dirty[tp] = struct{}{}
		if int(p) >= len(parts) {
			if pt := n.parts[tp]; pt != nil {
				pt.leaderlessSince = time.Time{}
			}
		}
	}
	for _, p := range parts {
		tp := TopicPartition{Topic: topic, Partition: p}
		n.want[tp] = struct{}{}
		if l := prefer[p]; len(l) > 0 {
			n.prefer[tp] = l
		}
		n.dirty[tp] = struct{}{}
	}
	if len(parts) == 0 {
		delete(n.wantTopics, topic)
	} else {
		n.wantTopics[topic] = parts
	}
	for _, byTopic := range n.assigned {
		delete(byTopic, topic)
	}
	n.mu.Unlock()
	n.kick()
}

// samePrefer reports whether a and b give the same preferred lists to
// the partitions of topic.
func samePrefer(topic string, parts []int32, a, b map[TopicPartition][]int32) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	for _, p := range parts {
		tp := TopicPartition{Topic: topic, Partition: p}
		if !slices.Equal(a[tp], b[tp]) {
			return false
		}
	}
	return true
}

// planLocked returns what to do now. Every action it returns has its
// partition marked busy. n.mu is held.
func (n *Node) planLocked(now time.Time) []action {
	if n.fenceLost && n.cur != nil && !n.closing {
		// Our own fence was deleted while we are registered: only a
		// process of this broker id that thinks us dead does that. Act
		// as deposed: end the session; the session loop finds the fence
		// gone, releases everything and registers a new holding.
		n.fenceLost = false
		n.log.Error("our holding's fence key was deleted although we are registered; starting over with a new holding")
		go n.cur.s.Close()
		return nil
	}
	if n.closing || n.cur == nil || n.hold == nil || !n.view.synced || !n.LeaseValid() {
		// Suspended (LeaseValid false): nothing is done on a lease that
		// may be gone until a renewal says it is not. What changed
		// meanwhile is looked at in full afterwards.
		n.fullPass = true
		return nil
	}
	self := n.cfg.BrokerID
	if _, ok := n.view.members[self]; !ok {
		// Our registration is not in the view yet: without ourselves in
		// the member list we would hand everything away.
		n.fullPass = true
		return nil
	}
	live := make([]int32, 0, len(n.view.members))
	eligible := make([]int32, 0, len(n.view.members))
	for id, m := range n.view.members {
		live = append(live, id)
		if id == self || m.since.IsZero() || now.Sub(m.since) >= n.cfg.RebalanceDelay {
			eligible = append(eligible, id)
		} else {
			// Hand-offs to it start then, for every partition.
			n.fullAt(m.since.Add(n.cfg.RebalanceDelay))
		}
	}
	// A broker without a broker key whose holding stands (its session
	// ended in an etcd stall, and it is registering a new one) keeps its
	// place: its partitions wait for it rather than move, until its
	// holding is deposed (planHoldings).
	for _, b := range n.view.fences {
		if _, registered := n.view.regs[b]; b >= 0 && !registered && !slices.Contains(live, b) {
			live = append(live, b)
			eligible = append(eligible, b)
		}
	}
	pc := planCtx{n: n, now: now, self: self,
		live: n.placementLocked(live), eligible: n.placementLocked(eligible)}
	if now.Before(n.settleUntil) {
		n.fullAt(n.settleUntil)
	}
	if n.fullPass || !now.Before(n.nextFull) {
		began := time.Now()
		clear(n.dirty)
		clear(n.recheck)
		for tp := range n.dropped {
			pc.plan(tp)
		}
		for tp := range n.owned {
			pc.plan(tp)
		}
		for tp := range n.want {
			pc.plan(tp)
		}
		for tp, lv := range n.view.leaders {
			if lv.Broker == self {
				pc.plan(tp)
			}
		}
		n.fullPass = false
		n.nextFull = now.Add(max(minFullEvery, 100*time.Since(began)))
	} else {
		tps := make([]TopicPartition, 0, len(n.dirty))
		for tp := range n.dirty {
			tps = append(tps, tp)
		}
		clear(n.dirty)
		for tp, due := range n.recheck {
			if !now.Before(due) {
				tps = append(tps, tp)
				delete(n.recheck, tp)
			}
		}
		for _, tp := range tps {
			pc.plan(tp)
		}
	}
	if a, ok := n.planControllerLocked(); ok {
		n.ctrlBusy = true
		pc.acts = append(pc.acts, a)
	}
	pc.planHoldings()
	return pc.acts
}

// planHoldings deposes the holdings of other brokers that no broker key
// has vouched for long enough (fenceHolding). A broker whose session ends
// because etcd stalled registers a new session for its holding as soon as
// etcd answers, and keeps its partitions: so after this node itself
// could not reach etcd (its lease validity lapsed, or its own session
// ended) within a lease TTL before a holding's liveness ended, it waits
// TakeoverGrace before deposing it, the time that broker needs to come
// back. When this node's lease stayed valid throughout, etcd was
// answering: the other broker is dead, paused or cut off, and its
// holding is deposed at once, as its lease's expiry used to end its
// leaderships. n.mu is held.
func (pc *planCtx) planHoldings() {
	n, now := pc.n, pc.now
	for h, broker := range n.view.fences {
		if h == n.hold.id || broker < 0 || n.view.holderLive(h) {
			delete(n.holderGone, h)
			continue
		}
		gone, ok := n.holderGone[h]
		if !ok {
			gone = now
			n.holderGone[h] = gone
		}
		// Deposed at once if our own lease was valid throughout the TTL
		// before (etcd answered us; the holding's broker is dead, paused
		// or cut off); otherwise TakeoverGrace after gone, which is a
		// moment we reached etcd (this runs only then): the time that
		// broker has had to come back since etcd answers again.
		due := gone
		if hs := cmp.Or(n.healthySince, now); hs.After(gone.Add(-n.cfg.LeaseTTL)) {
			due = gone.Add(n.cfg.TakeoverGrace)
		}
		if now.Before(due) || n.fencing[h] {
			continue
		}
		n.fencing[h] = true
		pc.acts = append(pc.acts, action{kind: actFenceHolding, holder: h, broker: broker, brokerVer: n.view.regs[broker].version})
	}
	for h := range n.holderGone {
		if _, ok := n.view.fences[h]; !ok {
			delete(n.holderGone, h)
		}
	}
	for h := range n.lastClaim {
		if _, ok := n.view.fences[h]; !ok {
			delete(n.lastClaim, h)
		}
	}
}

// fullAt asks for a full pass at t, if none is due before. n.mu is held.
func (n *Node) fullAt(t time.Time) {
	if t.Before(n.nextFull) {
		n.nextFull = t
	}
}

// markDirty has tp looked at in the next pass. n.mu is held.
func (n *Node) markDirty(tp TopicPartition) { n.dirty[tp] = struct{}{} }

// planCtx is one planning pass.
type planCtx struct {
	n              *Node
	now            time.Time
	self           int32
	live, eligible placement
	acts           []action
}

func (pc *planCtx) add(a action) {
	a.p.busy = true
	pc.acts = append(pc.acts, a)
}

// fallbackAt is when a broker that is not p's desired owner may claim it:
// once it has been leaderless for twice the lease, or, if the watch has
// shown the desired owner claiming any partition since p lost its leader
// (it is alive, working through a paced take-over of thousands, or
// failing this one's Acquire), once it has been leaderless for
// fallbackHold. n.mu is held.
func (n *Node) fallbackAt(p *part, desired int32) time.Time {
	if r, ok := n.view.regs[desired]; ok && n.lastClaim[r.holder].After(p.leaderlessSince) {
		return p.leaderlessSince.Add(fallbackHold(n.cfg.LeaseTTL))
	}
	return p.leaderlessSince.Add(2*n.cfg.LeaseTTL + time.Millisecond)
}

// later has tp looked at again at due (it is waiting for time to pass);
// a partition that is busy needs no recheck: its action's end marks it
// dirty.
func (pc *planCtx) later(tp TopicPartition, due time.Time) {
	n := pc.n
	if old, ok := n.recheck[tp]; !ok || due.Before(old) {
		n.recheck[tp] = due
	}
}

// plan decides what to do about tp: the partition's part of a pass.
func (pc *planCtx) plan(tp TopicPartition) {
	n, now, self := pc.n, pc.now, pc.self
	if t := n.dropped[tp]; t != nil {
		if p := n.partLocked(tp); !p.busy {
			pc.add(action{kind: actDrop, tp: tp, p: p, t: t})
		}
		return
	}
	if t := n.owned[tp]; t != nil {
		p := n.partLocked(tp)
		// Led (by us): a hand-off later starts a new leaderless spell,
		// whose fallback counts from then, not from before our claim.
		p.leaderlessSince = time.Time{}
		if p.busy || !t.ready {
			return
		}
		if now.Before(p.notBefore) {
			pc.later(tp, p.notBefore)
			return
		}
		lv, ok := n.view.leaders[tp]
		mine := ok && lv.Broker == self && lv.Epoch == t.epoch
		switch {
		case !mine && (t.seen || (ok && lv.Epoch > t.epoch) || now.Sub(t.since) > n.cfg.LeaseTTL):
			// Deleted or replaced after we saw it, or a newer epoch, or the
			// view never caught up: ask the store.
			pc.add(action{kind: actVerify, tp: tp, p: p, t: t})
		case !mine:
			pc.later(tp, t.since.Add(n.cfg.LeaseTTL+time.Millisecond))
		case !n.wantsLocked(tp):
			pc.add(action{kind: actRelease, tp: tp, p: p, t: t})
		default:
			// Every partition whose desired owner changed is handed
			// off at once (maxActions at a time), so a broker that
			// (re)joins gets its share back in one step.
			target := pc.eligible.owner(tp)
			if target < 0 || target == self {
				return
			}
			if hold := t.since.Add(fallbackHold(n.cfg.LeaseTTL)); t.fallback && now.Before(hold) {
				pc.later(tp, hold)
				return
			}
			pc.add(action{kind: actHandOff, tp: tp, p: p, t: t})
		}
		return
	}
	lv, led := n.view.liveLeader(tp)
	stale, keyed := n.view.leaders[tp] // stale if keyed && !led: its holding was deposed
	if n.wantsLocked(tp) && !led {
		p := n.partLocked(tp)
		if p.leaderlessSince.IsZero() {
			p.leaderlessSince = now
		}
		if p.busy {
			return
		}
		if now.Before(p.notBefore) {
			pc.later(tp, p.notBefore)
			return
		}
		if now.Before(n.settleUntil) {
			// Settling (joinSettle): only what was ours, wherever the
			// partial member list would place it; a hand-off moves it
			// later if another broker is its desired owner.
			last, known := n.lastLeader[tp]
			if n.prevHeld[tp] || (known && last == self) || (keyed && stale.Broker == self) {
				pc.add(action{kind: actAcquire, tp: tp, p: p})
			} else {
				pc.later(tp, n.settleUntil)
			}
			return
		}
		desired := pc.live.owner(tp)
		fallbackAt := n.fallbackAt(p, desired)
		fallback := desired != self && now.After(fallbackAt)
		if desired == self || fallback {
			pc.add(action{kind: actAcquire, tp: tp, p: p, fallback: fallback})
		} else {
			pc.later(tp, fallbackAt)
		}
		return
	}
	if keyed && !led {
		// A deposed holding's key of a partition nobody wants: its
		// desired owner among the live brokers deletes it.
		p := n.partLocked(tp)
		switch {
		case p.busy || pc.live.owner(tp) != self:
		case now.Before(p.notBefore):
			pc.later(tp, p.notBefore)
		default:
			pc.add(action{kind: actStale, tp: tp, p: p})
		}
		return
	}
	if led {
		if p := n.parts[tp]; p != nil {
			p.leaderlessSince = time.Time{}
		}
		if lv.Broker == self && lv.holder == n.hold.id {
			// A leader key of ours that no tenure holds.
			p := n.partLocked(tp)
			switch {
			case p.busy:
			case now.Before(p.notBefore):
				pc.later(tp, p.notBefore)
			default:
				pc.add(action{kind: actOrphan, tp: tp, p: p})
			}
		}
	}
}
