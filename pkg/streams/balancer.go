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
// topic of a task group goes to one member. It is eager (every rebalance
// revokes everything, as Kafka Streams' assignor did before KIP-429) and
// sticky: a member keeps the tasks it owned while it is under the fair
// share, so its stores stay where they are.
//
// Members send their query endpoint in their metadata's UserData; the
// leader sends every member the map of task owners' endpoints in the
// assignment's UserData, so any member can route a query.
type copartitionBalancer struct {
	group    map[string]string // resolved topic -> its task group's representative
	endpoint string

	mu     sync.Mutex
	owners map[string]map[int32]string // group -> partition -> endpoint, from the last assignment
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

func (*copartitionBalancer) ProtocolName() string { return "sluice-streams-copartition" }
func (*copartitionBalancer) IsCooperative() bool  { return false }

func (b *copartitionBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.UserData = []byte(b.endpoint)
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
	owners := map[string]map[int32]string{}
	if len(a.UserData) > 0 {
		if err := json.Unmarshal(a.UserData, &owners); err != nil {
			return nil, fmt.Errorf("streams: parsing the task owners of an assignment: %w", err)
		}
	}
	b.mu.Lock()
	b.owners = owners
	b.mu.Unlock()
	out := map[string][]int32{}
	for _, t := range a.Topics {
		out[t.Topic] = t.Partitions
	}
	return out, nil
}

// withOwners adds the task owners' endpoints to every member's assignment.
type withOwners struct {
	plan   kgo.IntoSyncAssignment
	owners []byte
}

func (w withOwners) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := w.plan.IntoSyncAssignment()
	for i := range out {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // kgo wrote it; it parses
		}
		a.UserData = w.owners
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

// Balance gives each task to one member: first back to its previous owner
// while that member is under its share, then to the least loaded member.
func (b *copartitionBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	members := cb.Members()
	tasks := map[taskKey][]string{} // task -> its topics
	for topic := range cb.MemberTopics() {
		g, ok := b.group[topic]
		if !ok {
			g = topic
		}
		for p := int32(0); p < topics[topic]; p++ {
			k := taskKey{g, p}
			tasks[k] = append(tasks[k], topic)
		}
	}
	keys := make([]taskKey, 0, len(tasks))
	for k := range tasks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].group < keys[j].group || keys[i].group == keys[j].group && keys[i].partition < keys[j].partition
	})
	share := (len(keys) + len(members) - 1) / max(len(members), 1)
	owner := map[taskKey]int{}
	endpoints := make([]string, len(members))
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		for i := range members {
			if members[i].MemberID != m.MemberID {
				continue
			}
			endpoints[i] = string(meta.UserData)
			for _, o := range meta.OwnedPartitions {
				g, ok := b.group[o.Topic]
				if !ok {
					g = o.Topic
				}
				for _, p := range o.Partitions {
					owner[taskKey{g, p}] = i
				}
			}
		}
	})
	load := make([]int, len(members))
	assigned := map[taskKey]int{}
	for _, k := range keys {
		if i, ok := owner[k]; ok && load[i] < share {
			assigned[k] = i
			load[i]++
		}
	}
	for _, k := range keys {
		if _, ok := assigned[k]; ok {
			continue
		}
		best := 0
		for i := range load {
			if load[i] < load[best] {
				best = i
			}
		}
		assigned[k] = best
		load[best]++
	}
	plan := cb.NewPlan()
	owners := map[string]map[int32]string{}
	for _, k := range keys {
		m := &members[assigned[k]]
		for _, topic := range tasks[k] {
			plan.AddPartition(m, topic, k.partition)
		}
		if owners[k.group] == nil {
			owners[k.group] = map[int32]string{}
		}
		owners[k.group][k.partition] = endpoints[assigned[k]]
	}
	data, err := json.Marshal(owners)
	if err != nil {
		cb.SetError(err)
	}
	return withOwners{plan: plan, owners: data}
}
