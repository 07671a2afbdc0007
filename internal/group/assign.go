package group

import (
	"bytes"
	"sort"
)

// assignment is a set of partitions by topic id; partition lists are
// sorted and never empty.
type assignment map[[16]byte][]int32

func (a assignment) ids() [][16]byte {
	out := make([][16]byte, 0, len(a))
	for id := range a {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

func (a assignment) has(id [16]byte, p int32) bool {
	ps := a[id]
	i := sort.Search(len(ps), func(i int) bool { return ps[i] >= p })
	return i < len(ps) && ps[i] == p
}

func (a assignment) add(id [16]byte, p int32) {
	if a.has(id, p) {
		return
	}
	ps := append(a[id], p)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	a[id] = ps
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for id, ps := range a {
		qs := b[id]
		if len(ps) != len(qs) {
			return false
		}
		for i := range ps {
			if ps[i] != qs[i] {
				return false
			}
		}
	}
	return true
}

func (a assignment) each(f func(id [16]byte, p int32)) {
	for id, ps := range a {
		for _, p := range ps {
			f(id, p)
		}
	}
}

func fromOwned(owned []IDPartitions) assignment {
	a := assignment{}
	for _, t := range owned {
		for _, p := range t.Partitions {
			a.add(t.ID, p)
		}
	}
	return a
}

// assignInput is what an assignor sees: members (sorted by id) with the
// topics they subscribe to, the topics, and the current target for
// stickiness.
type assignInput struct {
	members []string
	subs    map[string]map[[16]byte]bool
	topics  []TopicMeta // sorted by name
	current map[string]assignment
}

// assignUniform is the "uniform" assignor: every partition of a subscribed
// topic goes to one subscriber, counts differ by at most one among members
// that can take the same partitions, and partitions stay where they are
// when that keeps the balance (as Kafka's UniformAssignor).
func assignUniform(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	count := map[string]int{}
	for _, m := range in.members {
		out[m] = assignment{}
	}
	owner := map[tpKey]string{}
	var all []tpKey
	for _, t := range in.topics {
		for p := int32(0); p < t.Partitions; p++ {
			all = append(all, tpKey{t.ID, p})
		}
	}
	eligible := func(m string, k tpKey) bool { return in.subs[m][k.id] }
	// Per topic quota among its subscribers keeps stickiness bounded: a
	// member keeps at most ceil(total/members) partitions.
	total := 0
	for _, k := range all {
		for _, m := range in.members {
			if eligible(m, k) {
				total++
				break
			}
		}
	}
	quota := 0
	if len(in.members) > 0 {
		quota = (total + len(in.members) - 1) / len(in.members)
	}
	for _, m := range in.members {
		cur := in.current[m]
		for _, k := range all {
			if cur.has(k.id, k.p) && eligible(m, k) && owner[k] == "" && count[m] < quota {
				owner[k] = m
				count[m]++
			}
		}
	}
	for _, k := range all {
		if owner[k] != "" {
			continue
		}
		best := ""
		for _, m := range in.members {
			if eligible(m, k) && (best == "" || count[m] < count[best]) {
				best = m
			}
		}
		if best != "" {
			owner[k] = best
			count[best]++
		}
	}
	// Balance: move a partition from a member with two more than an
	// eligible other, until none can move.
	for moved := true; moved; {
		moved = false
		for _, k := range all {
			from := owner[k]
			if from == "" {
				continue
			}
			for _, to := range in.members {
				if to != from && eligible(to, k) && count[to]+1 < count[from] {
					owner[k] = to
					count[from]--
					count[to]++
					moved = true
					break
				}
			}
		}
	}
	for _, k := range all {
		if m := owner[k]; m != "" {
			out[m].add(k.id, k.p)
		}
	}
	return out
}

// assignRange is the "range" assignor: per topic, its subscribers sorted
// by member id get contiguous ranges, the first ones one more partition
// when the count does not divide (as Kafka's RangeAssignor).
func assignRange(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	for _, m := range in.members {
		out[m] = assignment{}
	}
	for _, t := range in.topics {
		var subs []string
		for _, m := range in.members {
			if in.subs[m][t.ID] {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int(t.Partitions)
		per, extra := n/len(subs), n%len(subs)
		p := 0
		for i, m := range subs {
			k := per
			if i < extra {
				k++
			}
			for j := 0; j < k; j++ {
				out[m].add(t.ID, int32(p))
				p++
			}
		}
	}
	return out
}

// Member states, as Kafka's MemberState (stored in the current assignment
// record).
const (
	msStable     int8 = 0
	msUnrevoked  int8 = 1
	msUnreleased int8 = 2
)

var stateNames = map[int8]string{msStable: "stable", msUnrevoked: "unrevoked_partitions", msUnreleased: "unreleased_partitions"}

// reconcile is Kafka's CurrentAssignmentBuilder: it moves member m one step
// towards its target. A partition leaves m by revocation first (m stays at
// its epoch until its heartbeat no longer lists it); a partition joins m
// only when no other member holds it (owner returns "" or m). owned is nil
// when the heartbeat did not carry the owned partitions.
func reconcile(m *cmember, targetEpoch int32, target assignment, owned assignment, owner func(tpKey) string) {
	switch m.state {
	case msStable:
		if m.epoch == targetEpoch {
			return
		}
	case msUnrevoked:
		if owned == nil || ownsAny(owned, m.pending) {
			return
		}
	}
	next(m, targetEpoch, target, owned, owner)
}

func ownsAny(owned, revoke assignment) bool {
	if owned == nil {
		return true
	}
	found := false
	revoke.each(func(id [16]byte, p int32) {
		if owned.has(id, p) {
			found = true
		}
	})
	return found
}

func next(m *cmember, targetEpoch int32, target assignment, owned assignment, owner func(tpKey) string) {
	keep, revoke, add := assignment{}, assignment{}, assignment{}
	unreleased := false
	m.assigned.each(func(id [16]byte, p int32) {
		if target.has(id, p) {
			keep.add(id, p)
		} else {
			revoke.add(id, p)
		}
	})
	target.each(func(id [16]byte, p int32) {
		if m.assigned.has(id, p) {
			return
		}
		if o := owner(tpKey{id, p}); o != "" && o != m.id {
			unreleased = true
			return
		}
		add.add(id, p)
	})
	switch {
	case len(revoke) > 0 && ownsAny(owned, revoke):
		m.state = msUnrevoked
		m.assigned, m.pending = keep, revoke
	default:
		// Everything to revoke is already released: take the target epoch
		// with whatever of the target is free.
		add.each(func(id [16]byte, p int32) { keep.add(id, p) })
		if m.epoch != targetEpoch {
			m.prevEpoch, m.epoch = m.epoch, targetEpoch
		}
		m.assigned, m.pending = keep, assignment{}
		m.state = msStable
		if unreleased {
			m.state = msUnreleased
		}
	}
}
