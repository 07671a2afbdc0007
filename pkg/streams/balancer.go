package streams

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// copartitionBalancer assigns tasks, not partitions: partition p of every
// topic of a task group goes to one member. It is cooperative (KIP-429):
// kgo revokes from a member only the partitions that move away from it,
// in a first round, and hands them to their new owner in a second one, so
// tasks that stay keep running and keep their open stores. It is sticky: a
// member keeps the tasks it owned while it is under its fair share.
//
// It also places standby replicas: each task gets up to standbys other
// members that keep a warm copy of its stores by tailing the changelogs.
// A task without an owner (its owner left) goes preferably to a member
// that held it as a standby, so the new owner restores only the tail.
//
// Members send a memberInfo (query endpoint, standby tasks held) as JSON
// in their metadata's UserData; the leader sends every member an
// assignInfo (every task owner's endpoint, the member's standby tasks) in
// the assignment's UserData, as Kafka Streams does.
type copartitionBalancer struct {
	group    map[string]string // resolved topic -> its task group's representative
	endpoint string
	standbys int // standby replicas per task, when this member leads

	mu      sync.Mutex
	owners  map[string]map[int32]string // group -> partition -> endpoint, from the last assignment
	standby map[string][]int32          // group -> partitions this member should keep warm
	held    func() map[string][]int32   // standby tasks this member holds now (nil: none)
}

// memberInfo is a member's UserData in JoinGroup.
type memberInfo struct {
	Version  int                `json:"version,omitempty"`
	Endpoint string             `json:"endpoint,omitempty"`
	Standby  map[string][]int32 `json:"standby,omitempty"`
}

// assignInfo is the UserData of a member's assignment.
type assignInfo struct {
	Version int                         `json:"version,omitempty"`
	Owners  map[string]map[int32]string `json:"owners,omitempty"`
	Standby map[string][]int32          `json:"standby,omitempty"`
}

func newCopartitionBalancer(t *Topology, app, endpoint string) *copartitionBalancer {
	g := map[string]string{}
	for ref, rep := range t.groups {
		g[ref.resolve(app)] = rep.resolve(app)
	}
	return &copartitionBalancer{group: g, endpoint: endpoint}
}

// owner is the query endpoint of the member running partition p of group
// ("" when unknown).
func (b *copartitionBalancer) owner(group string, p int32) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[group][p]
}

// standbyTasks is the standby tasks the last assignment gave this member.
func (b *copartitionBalancer) standbyTasks() map[string][]int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.standby
}

func (*copartitionBalancer) ProtocolName() string { return "sluice-streams-cooperative" }
func (*copartitionBalancer) IsCooperative() bool  { return true }

func (b *copartitionBalancer) groupOf(topic string) string {
	if g, ok := b.group[topic]; ok {
		return g
	}
	return topic
}

func (b *copartitionBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	info := memberInfo{Version: groupInfoVersion, Endpoint: b.endpoint}
	b.mu.Lock()
	held := b.held
	b.mu.Unlock()
	if held != nil {
		info.Standby = held()
	}
	meta.UserData, _ = json.Marshal(info) // maps of strings and ints always marshal
	meta.Version = 2
	meta.Topics = interests
	meta.Generation = generation
	for topic, ps := range current {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = topic
		owned.Partitions = ps
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	sort.Slice(meta.OwnedPartitions, func(i, j int) bool { return meta.OwnedPartitions[i].Topic < meta.OwnedPartitions[j].Topic })
	return meta.AppendTo(nil)
}

func (b *copartitionBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("streams: parsing an assignment: %w", err)
	}
	info, err := decodeAssignInfo(a.UserData)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.owners, b.standby = info.Owners, info.Standby
	b.mu.Unlock()
	out := map[string][]int32{}
	for _, t := range a.Topics {
		out[t.Topic] = t.Partitions
	}
	return out, nil
}

// withInfo adds each member's assignInfo to its assignment.
type withInfo struct {
	plan   kgo.IntoSyncAssignment
	owners map[string]map[int32]string
	stand  map[string]map[string][]int32 // member id -> its standby tasks
}

func (w withInfo) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := w.plan.IntoSyncAssignment()
	for i := range out {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // kgo wrote it; it parses
		}
		a.UserData, _ = json.Marshal(assignInfo{Version: groupInfoVersion, Owners: w.owners, Standby: w.stand[out[i].MemberID]})
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
}

func (b *copartitionBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

type taskKey struct {
	group     string
	partition int32
}

// taskPlan is a balance before kgo's cooperative adjustment: every task's
// owner and standbys, by member index.
type taskPlan struct {
	keys      []taskKey            // every task, in order
	topics    map[taskKey][]string // task -> its topics
	assigned  map[taskKey]int
	standbys  map[taskKey][]int
	endpoints []string
}

// Balance gives each task to one member: first back to its previous owner
// while that member is under its share, then to a member that held it as
// a standby, then to the least loaded member. Then it places standbys.
// A task goes only to a member subscribed to all its topics; when no
// member is, balancing fails with ErrGroupProtocol.
func (b *copartitionBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	tp, err := b.plan(cb, topics)
	if err != nil {
		cb.SetError(err)
		return nil
	}
	members := cb.Members()
	plan := cb.NewPlan()
	owners := map[string]map[int32]string{}
	for _, k := range tp.keys {
		m := &members[tp.assigned[k]]
		for _, topic := range tp.topics[k] {
			plan.AddPartition(m, topic, k.partition)
		}
		if owners[k.group] == nil {
			owners[k.group] = map[int32]string{}
		}
		owners[k.group][k.partition] = tp.endpoints[tp.assigned[k]]
	}
	// Cooperative: a task moving from one member to another is left out
	// of this round; its old owner revokes it and rejoins, and the next
	// round gives it to its new owner.
	plan.AdjustCooperative(cb)
	stand := map[string]map[string][]int32{}
	for _, k := range tp.keys {
		for _, i := range tp.standbys[k] {
			id := members[i].MemberID
			if stand[id] == nil {
				stand[id] = map[string][]int32{}
			}
			stand[id][k.group] = append(stand[id][k.group], k.partition)
		}
	}
	return withInfo{plan: plan, owners: owners, stand: stand}
}

// plan computes the task assignment from the members' metadata. A
// member's UserData that does not decode (another version, or broken)
// counts as none: the member gets tasks but is not known as a standby
// holder or by its endpoint. Owned partitions and standbys of tasks that
// do not exist are ignored.
func (b *copartitionBalancer) plan(cb *kgo.ConsumerBalancer, topics map[string]int32) (*taskPlan, error) {
	members := cb.Members()
	n := len(members)
	tp := &taskPlan{topics: map[taskKey][]string{}, endpoints: make([]string, n)}
	for topic := range cb.MemberTopics() {
		g := b.groupOf(topic)
		for p := int32(0); p < topics[topic]; p++ {
			k := taskKey{g, p}
			tp.topics[k] = append(tp.topics[k], topic)
		}
	}
	for k, ts := range tp.topics {
		sort.Strings(ts)
		tp.keys = append(tp.keys, k)
	}
	sort.Slice(tp.keys, func(i, j int) bool {
		ki, kj := tp.keys[i], tp.keys[j]
		return ki.group < kj.group || ki.group == kj.group && ki.partition < kj.partition
	})
	if len(tp.keys) > 0 && n == 0 {
		return nil, fmt.Errorf("%w: no members", ErrGroupProtocol)
	}
	owner := map[taskKey]int{}
	warm := map[taskKey][]int{} // task -> members holding a standby of it
	subs := make([]map[string]bool, n)
	gens := make([]int32, n)
	i := 0
	cb.EachMember(func(_ *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		subs[i] = map[string]bool{}
		for _, t := range meta.Topics {
			subs[i][t] = true
		}
		gens[i] = meta.Generation
		info, _ := decodeMemberInfo(meta.UserData) // undecodable: no info
		tp.endpoints[i] = info.Endpoint
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				k := taskKey{b.groupOf(o.Topic), p}
				// Of two claims, the one of the newer generation is
				// current (KIP-792); the older is a member that missed
				// a rebalance.
				if _, ok := tp.topics[k]; ok {
					if j, claimed := owner[k]; !claimed || meta.Generation > gens[j] {
						owner[k] = i
					}
				}
			}
		}
		for g, ps := range info.Standby {
			for _, p := range ps {
				k := taskKey{g, p}
				if _, ok := tp.topics[k]; ok && !slicesContains(warm[k], i) {
					warm[k] = append(warm[k], i)
				}
			}
		}
		i++
	})
	eligible := map[taskKey][]bool{}
	for _, k := range tp.keys {
		e := make([]bool, n)
		some := false
		for m := range n {
			e[m] = true
			for _, t := range tp.topics[k] {
				e[m] = e[m] && subs[m][t]
			}
			some = some || e[m]
		}
		if !some {
			return nil, fmt.Errorf("%w: no member subscribes to all the co-partitioned topics %v (members of different topologies?)", ErrGroupProtocol, tp.topics[k])
		}
		eligible[k] = e
	}
	tp.assigned = assignTasks(tp.keys, n, owner, warm, eligible)
	tp.standbys = placeStandbys(tp.keys, n, b.standbys, tp.assigned, owner, warm, eligible)
	return tp, nil
}

// assignTasks gives each task (keys, in order) to one of n members: each
// member gets len(keys)/n or one more, previous owners keep their tasks
// within that, and a task without one goes to a member holding it warm if
// one has room, else to the least loaded member. Only eligible members
// (nil: all) take a task; when none of them has room left (members with
// different subscriptions), the least loaded eligible member takes it
// beyond its share.
func assignTasks(keys []taskKey, n int, owner map[taskKey]int, warm map[taskKey][]int, eligible map[taskKey][]bool) map[taskKey]int {
	assigned := map[taskKey]int{}
	if n <= 0 {
		return assigned
	}
	base, extra := len(keys)/n, len(keys)%n
	load := make([]int, n)
	room := func(i int) bool { return load[i] < base || load[i] == base && extra > 0 }
	ok := func(k taskKey, i int) bool { return i >= 0 && i < n && (eligible[k] == nil || eligible[k][i]) }
	take := func(k taskKey, i int) {
		if load[i] == base {
			extra--
		}
		load[i]++
		assigned[k] = i
	}
	for _, k := range keys {
		if i, has := owner[k]; has && ok(k, i) && room(i) {
			take(k, i)
		}
	}
	for _, k := range keys {
		if _, done := assigned[k]; done {
			continue
		}
		best := -1
		for _, i := range warm[k] {
			if ok(k, i) && room(i) && (best < 0 || load[i] < load[best]) {
				best = i
			}
		}
		if best < 0 {
			best = leastLoaded(load, func(i int) bool { return ok(k, i) && room(i) })
		}
		if best < 0 { // every eligible member is full: one goes beyond its share
			best = leastLoaded(load, func(i int) bool { return ok(k, i) })
		}
		take(k, best)
	}
	return assigned
}

// leastLoaded is the first member with the least load among those fit
// accepts, or -1.
func leastLoaded(load []int, fit func(int) bool) int {
	best := -1
	for i := range load {
		if fit(i) && (best < 0 || load[i] < load[best]) {
			best = i
		}
	}
	return best
}

// placeStandbys picks up to want eligible members other than the owner for
// each task: members that already hold it (its previous owner, or warm)
// first, then the members after the owner in member order.
func placeStandbys(keys []taskKey, n, want int, assigned, owner map[taskKey]int, warm map[taskKey][]int, eligible map[taskKey][]bool) map[taskKey][]int {
	out := map[taskKey][]int{}
	if want <= 0 || n < 2 {
		return out
	}
	want = min(want, n-1)
	for _, k := range keys {
		own := assigned[k]
		var picked []int
		add := func(i int) {
			if i == own || i < 0 || i >= n || len(picked) >= want || slicesContains(picked, i) ||
				eligible[k] != nil && !eligible[k][i] {
				return
			}
			picked = append(picked, i)
		}
		if prev, ok := owner[k]; ok {
			add(prev)
		}
		for _, i := range warm[k] {
			add(i)
		}
		for d := 1; d < n; d++ {
			add((own + d) % n)
		}
		if len(picked) > 0 {
			out[k] = picked
		}
	}
	return out
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
