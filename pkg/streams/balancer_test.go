package streams

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func balanceOnce(t *testing.T, bal *copartitionBalancer, owned []map[string][]int32, parts map[string]int32) []map[string][]int32 {
	t.Helper()
	var topics []string
	for topic := range parts {
		topics = append(topics, topic)
	}
	var members []kmsg.JoinGroupResponseMember
	for i, o := range owned {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = fmt.Sprintf("m%d", i)
		m.ProtocolMetadata = bal.JoinGroupMetadata(topics, o, 1)
		members = append(members, m)
	}
	mb, _, err := bal.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string][]int32, len(owned))
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range into.IntoSyncAssignment() {
		var i int
		fmt.Sscanf(a.MemberID, "m%d", &i)
		if out[i], err = bal.ParseSyncAssignment(a.MemberAssignment); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestCopartitionBalancer(t *testing.T) {
	b := NewBuilder()
	a := Stream(b, "a", String(), String())
	c := Stream(b, "c", String(), String())
	Count(GroupByKey(a.Merge(c), String(), String()), "ac")
	Stream(b, "x", String(), String()).To("y", String(), String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	bal := newCopartitionBalancer(topo, "app", "")
	parts := map[string]int32{"a": 3, "c": 3, "x": 3}

	check := func(got []map[string][]int32) {
		t.Helper()
		seen := map[string]int{}
		for i, asg := range got {
			n := 0
			for topic, ps := range asg {
				for _, p := range ps {
					seen[fmt.Sprintf("%s/%d", topic, p)] = i
					n++
				}
			}
			if n < 3 || n > 6 {
				t.Errorf("member %d got %d partitions: %v", i, n, asg)
			}
		}
		if len(seen) != 9 {
			t.Errorf("%d partitions assigned, want 9: %v", len(seen), got)
		}
		for p := range 3 {
			if seen[fmt.Sprintf("a/%d", p)] != seen[fmt.Sprintf("c/%d", p)] {
				t.Errorf("a/%d and c/%d went to different members: %v", p, p, got)
			}
		}
	}
	first := balanceOnce(t, bal, []map[string][]int32{nil, nil}, parts)
	check(first)
	// Same members, previous assignment given back: nothing moves.
	again := balanceOnce(t, bal, first, parts)
	check(again)
	if fmt.Sprint(again) != fmt.Sprint(first) {
		t.Errorf("rebalance moved tasks: %v, then %v", first, again)
	}
	// A third member takes tasks only from others' surplus.
	third := balanceOnce(t, bal, append(first, nil), parts)
	for i := range 2 {
		for topic, ps := range third[i] {
			for _, p := range ps {
				if !contains(first[i][topic], p) {
					t.Errorf("member %d gained %s/%d when a member joined", i, topic, p)
				}
			}
		}
	}
}

func contains(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}
