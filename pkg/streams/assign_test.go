package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func keysN(n int) []taskKey {
	out := make([]taskKey, n)
	for i := range out {
		out[i] = taskKey{"t", int32(i)}
	}
	return out
}

// byIndex lists each key's member, in key order.
func byIndex(keys []taskKey, m map[taskKey]int) []int {
	out := make([]int, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

func TestAssignTasks(t *testing.T) {
	k := keysN(7)
	only := func(n int, who ...int) []bool {
		e := make([]bool, n)
		for _, i := range who {
			e[i] = true
		}
		return e
	}
	for _, tc := range []struct {
		name     string
		tasks, n int
		owner    map[taskKey]int
		warm     map[taskKey][]int
		eligible map[taskKey][]bool
		want     []int
	}{
		// Least loaded, lowest index first: 3/2 and 3/2/2 tasks.
		{name: "fresh 5 over 2", tasks: 5, n: 2, want: []int{0, 1, 0, 1, 0}},
		{name: "fresh 7 over 3", tasks: 7, n: 3, want: []int{0, 1, 2, 0, 1, 2, 0}},
		{name: "more members than tasks", tasks: 2, n: 3, want: []int{0, 1}},
		// Same members, same owners: nothing moves, even when uneven
		// within the share.
		{name: "sticky", tasks: 5, n: 2, owner: map[taskKey]int{k[0]: 1, k[1]: 1, k[2]: 1, k[3]: 0, k[4]: 0}, want: []int{1, 1, 1, 0, 0}},
		// A third member joins two that own 3 each: the share is 2, so
		// each gives up its last task and keeps the rest.
		{name: "join", tasks: 6, n: 3, owner: map[taskKey]int{k[0]: 0, k[1]: 0, k[2]: 0, k[3]: 1, k[4]: 1, k[5]: 1}, want: []int{0, 0, 2, 1, 1, 2}},
		// A second member joins one that owns all 3: share 1 or 2; the
		// owner keeps 2 (it took the one extra), the newcomer takes 1.
		{name: "join uneven", tasks: 3, n: 2, owner: map[taskKey]int{k[0]: 0, k[1]: 0, k[2]: 0}, want: []int{0, 0, 1}},
		// A member left: its tasks 2 and 3 are orphans, spread by load.
		{name: "leave", tasks: 4, n: 2, owner: map[taskKey]int{k[0]: 0, k[1]: 1}, want: []int{0, 1, 0, 1}},
		// Orphan 1 goes to member 0, which holds it warm, though member
		// 1 is less loaded; without the standby it would be {0,1,0,1}.
		{name: "orphan to standby", tasks: 4, n: 2, owner: map[taskKey]int{k[0]: 0}, warm: map[taskKey][]int{k[1]: {0}}, want: []int{0, 0, 1, 1}},
		// The standby holder is full: the orphan goes by load.
		{name: "standby holder full", tasks: 4, n: 2, owner: map[taskKey]int{k[0]: 0, k[2]: 0}, warm: map[taskKey][]int{k[1]: {0}}, want: []int{0, 1, 0, 1}},
		// An owner index past the members (stale) is ignored.
		{name: "stale owner", tasks: 2, n: 2, owner: map[taskKey]int{k[0]: 5, k[1]: -1}, want: []int{0, 1}},
		// Member 1 cannot run tasks 0 and 1 (not subscribed).
		{name: "eligible", tasks: 4, n: 2, eligible: map[taskKey][]bool{k[0]: only(2, 0), k[1]: only(2, 0)}, want: []int{0, 0, 1, 1}},
		// Three tasks only member 0 can run: it goes past its share of 2.
		{name: "eligible past share", tasks: 4, n: 2, eligible: map[taskKey][]bool{k[0]: only(2, 0), k[1]: only(2, 0), k[2]: only(2, 0)}, want: []int{0, 0, 0, 1}},
		// A previous owner no longer eligible loses its task.
		{name: "owner not eligible", tasks: 2, n: 2, owner: map[taskKey]int{k[0]: 1}, eligible: map[taskKey][]bool{k[0]: only(2, 0)}, want: []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := keysN(tc.tasks)
			got := assignTasks(keys, tc.n, tc.owner, tc.warm, tc.eligible)
			if len(got) != tc.tasks {
				t.Fatalf("%d of %d tasks assigned: %v", len(got), tc.tasks, got)
			}
			if g := byIndex(keys, got); !reflect.DeepEqual(g, tc.want) {
				t.Errorf("got %v, want %v", g, tc.want)
			}
		})
	}
	if got := assignTasks(keysN(3), 0, nil, nil, nil); len(got) != 0 {
		t.Errorf("no members: %v", got)
	}
}

func TestPlaceStandbys(t *testing.T) {
	k := keysN(3)
	round := map[taskKey]int{k[0]: 0, k[1]: 1, k[2]: 2}
	for _, tc := range []struct {
		name     string
		n, want  int
		assigned map[taskKey]int
		owner    map[taskKey]int
		warm     map[taskKey][]int
		eligible map[taskKey][]bool
		expect   map[taskKey][]int
	}{
		{name: "none", n: 3, want: 0, assigned: round, expect: map[taskKey][]int{}},
		{name: "one member", n: 1, want: 1, assigned: map[taskKey]int{k[0]: 0}, expect: map[taskKey][]int{}},
		// The next member after the owner, wrapping.
		{name: "next member", n: 3, want: 1, assigned: round, expect: map[taskKey][]int{k[0]: {1}, k[1]: {2}, k[2]: {0}}},
		// 5 asked, 2 other members: capped at 2.
		{name: "capped", n: 3, want: 5, assigned: round, expect: map[taskKey][]int{k[0]: {1, 2}, k[1]: {2, 0}, k[2]: {0, 1}}},
		// Task 0 moved from member 2 to member 0: member 2 keeps it warm.
		{name: "previous owner", n: 3, want: 1, assigned: round, owner: map[taskKey]int{k[0]: 2}, expect: map[taskKey][]int{k[0]: {2}, k[1]: {2}, k[2]: {0}}},
		// The previous owner is the owner: never its own standby.
		{name: "not on owner", n: 3, want: 1, assigned: round, owner: round, expect: map[taskKey][]int{k[0]: {1}, k[1]: {2}, k[2]: {0}}},
		// Member 2 holds task 0 warm already: it stays the standby.
		{name: "warm first", n: 3, want: 1, assigned: round, warm: map[taskKey][]int{k[0]: {2}}, expect: map[taskKey][]int{k[0]: {2}, k[1]: {2}, k[2]: {0}}},
		// Member 1 cannot run task 0: its standby goes to member 2.
		{name: "eligible", n: 3, want: 2, assigned: round, eligible: map[taskKey][]bool{k[0]: {true, false, true}}, expect: map[taskKey][]int{k[0]: {2}, k[1]: {2, 0}, k[2]: {0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := keysN(len(tc.assigned))
			got := placeStandbys(keys, tc.n, tc.want, tc.assigned, tc.owner, tc.warm, tc.eligible)
			if !reflect.DeepEqual(got, tc.expect) {
				t.Errorf("got %v, want %v", got, tc.expect)
			}
		})
	}
}

// joinMember is a member's JoinGroup entry as the broker relays it.
func joinMember(id string, version int16, gen int32, topics []string, owned map[string][]int32, userData []byte) kmsg.JoinGroupResponseMember {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version, meta.Generation, meta.Topics, meta.UserData = version, gen, topics, userData
	for _, topic := range sortedTopics(owned) {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = topic, owned[topic]
		meta.OwnedPartitions = append(meta.OwnedPartitions, o)
	}
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.ProtocolMetadata = id, meta.AppendTo(nil)
	return m
}

func sortedTopics[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

func userData(t *testing.T, info memberInfo) []byte {
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// balanceMembers runs the leader's side and every member's parse: each
// member's partitions and standby tasks.
func balanceMembers(t *testing.T, bal *copartitionBalancer, members []kmsg.JoinGroupResponseMember, parts map[string]int32) (map[string]map[string][]int32, map[string]map[string][]int32, error) {
	t.Helper()
	mb, _, err := bal.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(parts)
	if err != nil {
		return nil, nil, err
	}
	got, stand := map[string]map[string][]int32{}, map[string]map[string][]int32{}
	for _, a := range into.IntoSyncAssignment() {
		if got[a.MemberID], err = bal.ParseSyncAssignment(a.MemberAssignment); err != nil {
			t.Fatal(err)
		}
		stand[a.MemberID] = bal.standbyTasks()
	}
	return got, stand, nil
}

func TestBalanceMembers(t *testing.T) {
	bal := fuzzBalancer(t, 0)
	ac := bal.groupOf("a") // the task group of a and c
	all := []string{"a", "c", "x"}
	parts := map[string]int32{"a": 3, "c": 3, "x": 3}

	t.Run("old metadata version and foreign UserData", func(t *testing.T) {
		// m1 speaks consumer metadata v0 (no owned partitions) and
		// sends UserData that is not ours: it still gets its share, and
		// m0 keeps what it owned. 6 tasks: 3 each.
		members := []kmsg.JoinGroupResponseMember{
			joinMember("m0", 2, 4, all, map[string][]int32{"a": {0, 1}, "c": {0, 1}, "x": {0, 1}}, userData(t, memberInfo{Version: 1, Endpoint: "h0:1"})),
			joinMember("m1", 0, 0, all, nil, []byte{0xde, 0xad}),
		}
		got, _, err := balanceMembers(t, bal, members, parts)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string][]int32{
			"m0": {"a": {0, 1}, "c": {0, 1}, "x": {0}},
			"m1": {"a": {2}, "c": {2}, "x": {2}},
		}
		// x/1 moves from m0 to m1: m0 revokes it first (cooperative), so
		// nobody gets it in this round.
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
		if ep := bal.owner(ac, 0); ep != "h0:1" {
			t.Errorf("owner endpoint of %s/0: %q", ac, ep)
		}
	})

	t.Run("a member of an older topology", func(t *testing.T) {
		// m1 does not read c, so it cannot run a task of a and c; those
		// go to m0 and m1 takes the x tasks.
		members := []kmsg.JoinGroupResponseMember{
			joinMember("m0", 2, 1, all, nil, nil),
			joinMember("m1", 2, 1, []string{"a", "x"}, nil, nil),
		}
		got, _, err := balanceMembers(t, bal, members, parts)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string][]int32{
			"m0": {"a": {0, 1, 2}, "c": {0, 1, 2}},
			"m1": {"x": {0, 1, 2}},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})

	t.Run("no member can run a task", func(t *testing.T) {
		members := []kmsg.JoinGroupResponseMember{
			joinMember("m0", 2, 1, []string{"a", "x"}, nil, nil),
			joinMember("m1", 2, 1, []string{"c", "x"}, nil, nil),
		}
		_, _, err := balanceMembers(t, bal, members, parts)
		if !errors.Is(err, ErrGroupProtocol) {
			t.Fatalf("got %v, want ErrGroupProtocol", err)
		}
	})

	t.Run("orphan to its standby and standbys placed", func(t *testing.T) {
		// m2 left, owning x/2; m1 kept a standby of it. m0 and m1 are
		// both under their share, m0 first by index: the standby wins.
		sb := fuzzBalancer(t, 1)
		xOnly := map[string]int32{"x": 3}
		members := []kmsg.JoinGroupResponseMember{
			joinMember("m0", 2, 7, []string{"x"}, map[string][]int32{"x": {0}}, nil),
			joinMember("m1", 2, 7, []string{"x"}, map[string][]int32{"x": {1}}, userData(t, memberInfo{Version: 1, Standby: map[string][]int32{"x": {2}}})),
		}
		got, stand, err := balanceMembers(t, sb, members, xOnly)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string][]int32{"m0": {"x": {0}}, "m1": {"x": {1, 2}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
		// One standby each, on the other member: m1 for x/0, m0 for
		// x/1 and x/2.
		wantStand := map[string]map[string][]int32{"m0": {"x": {1, 2}}, "m1": {"x": {0}}}
		if !reflect.DeepEqual(stand, wantStand) {
			t.Errorf("standbys %v, want %v", stand, wantStand)
		}
	})

	t.Run("stale claim of an older generation", func(t *testing.T) {
		// m1 missed a rebalance and still claims x/0, which m0 owns at
		// a newer generation: m0 keeps it.
		members := []kmsg.JoinGroupResponseMember{
			joinMember("m0", 2, 5, []string{"x"}, map[string][]int32{"x": {0}}, nil),
			joinMember("m1", 2, 3, []string{"x"}, map[string][]int32{"x": {0, 1}}, nil),
		}
		got, _, err := balanceMembers(t, bal, members, map[string]int32{"x": 2})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string][]int32{"m0": {"x": {0}}, "m1": {"x": {1}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestGroupInfoBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"empty", ``, true},
		{"current", `{"version":1,"endpoint":"h:1","standby":{"g":[0,3]}}`, true},
		{"version 0", `{"endpoint":"h:1"}`, true},
		{"newer version, unknown field", `{"version":9,"endpoint":"h:1","lag":{"g":5}}`, true},
		{"negative partition", `{"standby":{"g":[-1]}}`, false},
		{"wrong type", `{"standby":["g"]}`, false},
		{"not json", `\x00\x01`, false},
		{"too big", `{"endpoint":"` + string(make([]byte, maxMemberInfoBytes)) + `"}`, false},
		{"long endpoint", fmt.Sprintf(`{"endpoint":%q}`, string(make([]byte, maxEndpointBytes+1))), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeMemberInfo([]byte(tc.in))
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrGroupProtocol) {
				t.Errorf("err %v, want ok %v", err, tc.ok)
			}
		})
	}
	if _, err := decodeAssignInfo([]byte(`{"owners":{"g":{"-2":"h"}}}`)); !errors.Is(err, ErrGroupProtocol) {
		t.Errorf("negative owner partition: %v", err)
	}
	if _, err := decodeAssignInfo(make([]byte, maxAssignInfoBytes+1)); !errors.Is(err, ErrGroupProtocol) {
		t.Errorf("oversized assignment data: %v", err)
	}
}
