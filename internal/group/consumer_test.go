package group

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// cmem is a test member of a consumer-protocol group: it revokes at once
// and reports what it owns in every heartbeat.
type cmem struct {
	id, instance string
	epoch        int32
	owned        assignment
}

func (h *harness) cbeat(m *cmem, topics []string, assignor string) ConsumerHeartbeatResult {
	h.t.Helper()
	r := ConsumerHeartbeat{Version: 1, Group: "g", MemberID: m.id, MemberEpoch: m.epoch,
		RebalanceTimeoutMs: 10000, SubscribedTopics: topics, ServerAssignor: &assignor,
		Owned: toIDPartitions(m.owned), ClientID: "c", ClientHost: "/127.0.0.1"}
	if m.instance != "" {
		r.InstanceID = &m.instance
	}
	if m.epoch == 0 {
		r.Owned = []IDPartitions{}
	}
	res := <-h.c.ConsumerHeartbeat(context.Background(), r)
	if res.Err != nil {
		return res
	}
	m.epoch = res.MemberEpoch
	if res.HasAssignment {
		m.owned = fromOwned(res.Assignment)
	}
	return res
}

func topicID(n byte) [16]byte { return [16]byte{n} }

// settle heartbeats every member until all are stable at one epoch, and
// checks no partition is ever owned by two members.
func (h *harness) settle(ms []*cmem, topics []string, assignor string) {
	h.t.Helper()
	for round := 0; round < 20; round++ {
		for _, m := range ms {
			if res := h.cbeat(m, topics, assignor); res.Err != nil {
				h.t.Fatalf("heartbeat of %s: %v", m.id, res.Err)
			}
			seen := map[tpKey]string{}
			for _, x := range ms {
				x.owned.each(func(id [16]byte, p int32) {
					if o, ok := seen[tpKey{id, p}]; ok {
						h.t.Fatalf("partition %d owned by %s and %s", p, o, x.id)
					}
					seen[tpKey{id, p}] = x.id
				})
			}
		}
		g := h.c.DescribeConsumerGroups([]string{"g"})[0]
		if g.State == "Stable" {
			return
		}
	}
	h.t.Fatalf("group did not settle: %+v", h.c.DescribeConsumerGroups([]string{"g"})[0])
}

func TestConsumerGroupAssignAndRecover(t *testing.T) {
	for _, assignor := range Assignors {
		t.Run(assignor, func(t *testing.T) {
			h := newHarness(t)
			h.store.topics = []TopicMeta{{Name: "a", ID: topicID(1), Partitions: 6}, {Name: "b", ID: topicID(2), Partitions: 3}}
			ms := []*cmem{{id: "m1"}, {id: "m2"}, {id: "m3", instance: "i3"}}
			topics := []string{"a", "b"}
			h.settle(ms, topics, assignor)
			total := 0
			for _, m := range ms {
				total += m.owned.count()
			}
			if total != 9 {
				t.Fatalf("%d partitions owned, want 9", total)
			}
			// A partition added to a topic is assigned.
			h.store.topics[1].Partitions = 4
			h.settle(ms, topics, assignor)
			total = 0
			for _, m := range ms {
				total += m.owned.count()
			}
			if total != 10 {
				t.Fatalf("after adding a partition: %d owned, want 10", total)
			}
			before := h.c.DescribeConsumerGroups([]string{"g"})[0]

			// Restart: the group comes back with its members, epochs and
			// assignments; members carry on without being fenced.
			h.start()
			after := h.c.DescribeConsumerGroups([]string{"g"})[0]
			if !reflect.DeepEqual(before.Members, after.Members) || before.Epoch != after.Epoch {
				t.Fatalf("after restart:\n%+v\nbefore:\n%+v", after, before)
			}
			owned := map[string]assignment{}
			for _, m := range ms {
				owned[m.id] = m.owned
			}
			h.settle(ms, topics, assignor)
			for _, m := range ms {
				if !m.owned.equal(owned[m.id]) {
					t.Errorf("%s owns %v after restart, had %v", m.id, m.owned, owned[m.id])
				}
			}

			// Leave, then a member that stops heartbeating expires.
			res := <-h.c.ConsumerHeartbeat(context.Background(), ConsumerHeartbeat{Version: 1, Group: "g", MemberID: "m1", MemberEpoch: -1})
			if res.Err != nil || res.MemberEpoch != -1 {
				t.Fatalf("leave: %+v", res)
			}
			ms = ms[1:]
			h.settle(ms, topics, assignor)
			h.now = h.now.Add(46 * time.Second)
			h.c.tickAll()
			if d := h.c.DescribeConsumerGroups([]string{"g"})[0]; d.State != "Empty" {
				t.Fatalf("after session timeouts: %+v", d)
			}
		})
	}
}

func TestConsumerGroupErrors(t *testing.T) {
	h := newHarness(t)
	h.store.topics = []TopicMeta{{Name: "a", ID: topicID(1), Partitions: 2}}
	m := &cmem{id: "m1"}
	h.settle([]*cmem{m}, []string{"a"}, "uniform")
	for _, tc := range []struct {
		name string
		r    ConsumerHeartbeat
		want error
	}{
		{"epoch ahead", ConsumerHeartbeat{MemberID: "m1", MemberEpoch: m.epoch + 1}, ErrFencedMemberEpoch},
		{"unknown member", ConsumerHeartbeat{MemberID: "x", MemberEpoch: 1}, ErrUnknownMemberID},
		{"unknown assignor", ConsumerHeartbeat{MemberID: "m2", RebalanceTimeoutMs: 1, SubscribedTopics: []string{"a"}, Owned: []IDPartitions{}, ServerAssignor: ptr("sticky")}, ErrUnsupportedAssignor},
		{"bad regex", ConsumerHeartbeat{MemberID: "m2", RebalanceTimeoutMs: 1, SubscribedRegex: ptr("("), Owned: []IDPartitions{}}, ErrInvalidRegex},
		{"join with owned", ConsumerHeartbeat{MemberID: "m2", RebalanceTimeoutMs: 1, SubscribedTopics: []string{"a"}, Owned: []IDPartitions{{ID: topicID(1), Partitions: []int32{0}}}}, ErrInvalidRequest},
		{"static leave without instance", ConsumerHeartbeat{MemberID: "m1", MemberEpoch: -2}, ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.Version, tc.r.Group = 1, "g"
			if res := <-h.c.ConsumerHeartbeat(context.Background(), tc.r); !errors.Is(res.Err, tc.want) {
				t.Errorf("got %v, want %v", res.Err, tc.want)
			}
		})
	}
	// A classic join into a consumer group with members is refused.
	if res := <-h.c.Join(context.Background(), JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: []Protocol{{Name: "range"}},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}); !errors.Is(res.Err, ErrInconsistentProtocol) {
		t.Errorf("classic join: %v", res.Err)
	}
	if l, _ := h.c.List(); len(l) != 1 || l[0].Type != "consumer" || !slices.Contains([]string{"Stable"}, l[0].State) {
		t.Errorf("list: %+v", l)
	}
}

func FuzzDecodeConsumerRecord(f *testing.F) {
	m := &cmember{id: "m", topics: []string{"a"}, regex: "x.*", assigned: assignment{topicID(1): {0, 1}}, pending: assignment{}}
	f.Add(ckey(recConsumerGroupMemberMetadata, "g", "m"), cgMemberValue(m))
	f.Add(ckey(recConsumerGroupCurrentAssign, "g", "m"), cgCurrentValue(m))
	f.Add(ckey(recConsumerGroupTargetMember, "g", "m"), cgTargetMemberValue(m.assigned))
	f.Add(ckey(recConsumerGroupMetadata, "g"), cgMetadataValue(3))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		decodeRecord(key, value)
	})
}
