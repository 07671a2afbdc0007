package cluster

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"golang.org/x/time/rate"
)

// Pauses before a partition is looked at again.
const (
	conflictPause = 250 * time.Millisecond // a claim lost a race; the view catches up
	errorPause    = time.Second            // the meta store failed
	settlePause   = 200 * time.Millisecond // after deleting a key, until the watch shows it
	verifyPause   = 500 * time.Millisecond // the store says ours, the view lags
)

// fallbackHold is how long a leadership taken as a fallback (the desired
// owner kept failing Acquire) is kept before it is offered back.
func fallbackHold(ttl time.Duration) time.Duration { return 10 * ttl }

// failureBackoff is the pause after the n-th consecutive failed Acquire.
// It grows past 2*ttl, so a broker that keeps failing leaves the partition
// leaderless long enough for another to take it.
func failureBackoff(n int, ttl time.Duration) time.Duration {
	return min(250*time.Millisecond<<min(n-1, 16), 4*ttl)
}

// score is the rendezvous hash of a partition and a broker: FNV-64a of the
// topic, a 0 byte, the partition and the broker id (big endian), then a
// 64-bit finaliser so that brokers with close ids still scatter.
func score(tp TopicPartition, broker int32) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(tp.Topic); i++ {
		h ^= uint64(tp.Topic[i])
		h *= prime64
	}
	var b [9]byte
	binary.BigEndian.PutUint32(b[1:], uint32(tp.Partition))
	binary.BigEndian.PutUint32(b[5:], uint32(broker))
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// owner is the broker with the highest score for tp, or -1 if none.
func owner(tp TopicPartition, brokers []int32) int32 {
	best, bestScore := int32(-1), uint64(0)
	for _, b := range brokers {
		s := score(tp, b)
		if best < 0 || s > bestScore || (s == bestScore && b > best) {
			best, bestScore = b, s
		}
	}
	return best
}

// assign places every partition of tps on one of brokers, rendezvous
// hashing with bounded loads: per topic, in partition order, a partition
// goes to its highest-scoring broker that still has room. A topic's n
// partitions over B brokers give each broker floor(n/B), and n mod B of
// them one more, so the counts differ by at most one, as Kafka spreads a
// topic's leaders. Every broker computes the same assignment from the same
// partition set and brokers, in any order. Unlike plain rendezvous, a
// joining broker can also move a few partitions between the others: only
// leadership moves, by graceful hand-off.
//
// A partition with a preferred replica list (prefer, from a manual
// assignment or a reassignment) goes to the first of its replicas that is
// among brokers, as Kafka's preferred leader, whatever the load; the
// others of its topic fill the room that leaves.
func assign(tps map[TopicPartition]struct{}, prefer map[TopicPartition][]int32, brokers []int32) map[TopicPartition]int32 {
	out := make(map[TopicPartition]int32, len(tps))
	if len(brokers) == 0 {
		return out
	}
	byTopic := map[string][]int32{}
	for tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for topic, parts := range byTopic {
		slices.Sort(parts)
		for p, b := range assignTopic(topic, parts, prefer, brokers) {
			out[TopicPartition{Topic: topic, Partition: p}] = b
		}
	}
	return out
}

// assignTopic is assign for the partitions of one topic (sorted): topics
// are placed independently of each other, so a placement is computed and
// cached per topic (placement.owner), and a topic created or changed costs
// only its own partitions.
func assignTopic(topic string, parts []int32, prefer map[TopicPartition][]int32, brokers []int32) map[int32]int32 {
	out := make(map[int32]int32, len(parts))
	if len(brokers) == 0 {
		return out
	}
	load := make(map[int32]int, len(brokers))
	ranked := make([]int32, len(brokers))
	floor, extra := len(parts)/len(brokers), len(parts)%len(brokers)
	free := parts[:0:0]
	for _, p := range parts {
		tp := TopicPartition{Topic: topic, Partition: p}
		if b, ok := preferredLive(prefer[tp], brokers); ok {
			out[p] = b
			load[b]++
			continue
		}
		free = append(free, p)
	}
	for _, l := range load {
		if l > floor {
			extra -= min(l-floor, extra) // pinned partitions took extra places
		}
	}
	for _, p := range free {
		tp := TopicPartition{Topic: topic, Partition: p}
		copy(ranked, brokers)
		slices.SortFunc(ranked, func(a, b int32) int {
			sa, sb := score(tp, a), score(tp, b)
			switch {
			case sa != sb:
				return cmp.Compare(sb, sa) // highest score first
			default:
				return cmp.Compare(b, a) // as owner breaks ties
			}
		})
		placed := false
		for _, b := range ranked {
			if load[b] < floor || (load[b] == floor && extra > 0) {
				if load[b] == floor {
					extra-- // b takes one of the n mod B extra places
				}
				out[p] = b
				load[b]++
				placed = true
				break
			}
		}
		if !placed {
			// Pinned partitions filled the room: the least loaded
			// broker, the higher-ranked among equals.
			best := ranked[0]
			for _, b := range ranked[1:] {
				if load[b] < load[best] {
					best = b
				}
			}
			out[p] = best
			load[best]++
		}
	}
	return out
}

// preferredLive is the first of replicas among brokers.
func preferredLive(replicas, brokers []int32) (int32, bool) {
	for _, r := range replicas {
		if slices.Contains(brokers, r) {
			return r, true
		}
	}
	return -1, false
}

type actionKind uint8

const (
	actAcquire actionKind = iota + 1
	actHandOff            // graceful: another broker is now the desired owner
	actRelease            // graceful: the partition is no longer in the set
	actVerify             // the view says our key is gone: check the store
	actDrop               // relinquished: release (fenced) and delete the key
	actOrphan             // a key of ours we do not hold: delete it
	actStale              // a deposed holding's key of a partition nobody wants: delete it
	actClaimController
	actFenceHolding // depose a holding no broker key vouches for
)

type action struct {
	kind     actionKind
	tp       TopicPartition
	p        *part
	t        *tenure
	fallback bool
	// actFenceHolding: the holding, its broker and that broker's key
	// version as the view shows it.
	holder    int64
	broker    int32
	brokerVer int64
}

// reconcileLoop plans and starts actions on every change and every tick.
func (n *Node) reconcileLoop(ctx context.Context) {
	defer close(n.reconcileDone)
	t := time.NewTicker(n.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kickCh:
		case <-t.C:
		}
		n.noteValidity()
		began := time.Now()
		n.mu.Lock()
		acts := n.planLocked(n.now())
		n.mu.Unlock()
		n.observePlan(time.Since(began))
		for _, a := range acts {
			n.actWG.Add(1)
			go n.run(a)
		}
	}
}

// noteValidity logs and signals (Changes) when LeaseValid turns false or
// true again. Serving checks LeaseValid itself, on every request; this is
// for the operator and for waiters on Changes.
func (n *Node) noteValidity() {
	valid := n.LeaseValid()
	n.mu.Lock()
	changed := n.cur != nil && n.suspended == valid
	if changed {
		n.suspended = !valid
	}
	cur := n.cur
	n.mu.Unlock()
	if !changed {
		return
	}
	n.mu.Lock()
	if valid {
		n.healthySince = n.now()
	} else {
		n.healthySince = time.Time{}
	}
	n.mu.Unlock()
	if valid {
		n.mu.Lock()
		n.fullPass = true
		n.mu.Unlock()
		n.log.Info("lease renewed after its validity had passed; serving again", "session", fmt.Sprintf("%x", cur.s.ID()))
	} else {
		n.log.Warn("lease validity passed without a renewal (etcd unreachable, or this process stalled); not serving until etcd confirms the lease",
			"session", fmt.Sprintf("%x", cur.s.ID()), "valid_until_ago", time.Since(cur.s.ValidUntil()).Round(time.Millisecond))
	}
	n.notify()
}

// run executes one action: partition actions on the partition's serialised
// path, at most maxActions at a time.
func (n *Node) run(a action) {
	defer n.actWG.Done()
	defer n.kick()
	defer n.finish(a)
	if a.kind == actAcquire && !n.paceClaim() {
		return
	}
	select {
	case n.sem <- struct{}{}:
	case <-n.ctx.Done():
		return
	}
	defer func() { <-n.sem }()
	switch a.kind {
	case actClaimController:
		n.claimController()
		return
	case actFenceHolding:
		n.fenceHolding(a)
		return
	}
	a.p.op.Lock()
	defer a.p.op.Unlock()
	switch a.kind {
	case actAcquire:
		n.acquire(a.p, a.tp, a.fallback)
	case actHandOff:
		n.release(n.ctx, a.p, a.t, "hand-off")
	case actRelease:
		n.release(n.ctx, a.p, a.t, "partition removed")
	case actVerify:
		n.verify(a.p, a.t)
	case actDrop:
		n.drop(n.ctx, a.p, a.t)
	case actOrphan:
		n.deleteOrphan(a.p, a.tp)
	case actStale:
		n.deleteStale(a.p, a.tp)
	}
}

// paceClaim waits for the claim rate (Config.ClaimRate): a broker that
// takes over thousands of partitions at once (a dead broker's share, or
// its own after being deposed) claims them in batches at a bounded rate,
// so that etcd, which every broker's produce path also needs, is never
// flooded. False if the node closes meanwhile.
func (n *Node) paceClaim() bool {
	n.m.claimsWaiting.Inc()
	defer n.m.claimsWaiting.Dec()
	return n.claims.Wait(n.claimCtx) == nil
}

// newClaimLimiter is the limiter of Config.ClaimRate (after defaults):
// bursts of up to maxActions claims, or one second's worth if fewer.
func newClaimLimiter(perSecond float64) *rate.Limiter {
	if perSecond < 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(perSecond), max(1, min(maxActions, int(perSecond))))
}

func (n *Node) finish(a action) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a.p != nil {
		a.p.busy = false
		n.markDirty(a.tp)
	}
	switch a.kind {
	case actClaimController:
		n.ctrlBusy = false
	case actFenceHolding:
		delete(n.fencing, a.holder)
	}
}
