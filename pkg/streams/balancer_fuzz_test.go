package streams

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzMemberInfo feeds arbitrary bytes to the decoder of a member's
// JoinGroup UserData: it returns a memberInfo or an ErrGroupProtocol
// error, never panics, and what it accepts survives a round trip.
func FuzzMemberInfo(f *testing.F) {
	f.Add([]byte(`{"version":1,"endpoint":"10.0.0.1:8080","standby":{"app-a":[0,2]}}`))
	f.Add([]byte(`{"endpoint":"h:1"}`))
	f.Add([]byte(`{"standby":{"a":[-1]}}`))
	f.Add([]byte(`{"version":99,"future":[1,2,3],"standby":{"a":[1]}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeMemberInfo(b)
		if err != nil {
			if !errors.Is(err, ErrGroupProtocol) {
				t.Fatalf("error %v does not wrap ErrGroupProtocol", err)
			}
			return
		}
		for g, ps := range info.Standby {
			for _, p := range ps {
				if p < 0 {
					t.Fatalf("accepted standby partition %d of %s", p, g)
				}
			}
		}
		enc, err := json.Marshal(info)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeMemberInfo(enc)
		if err != nil || !reflect.DeepEqual(normInfo(again), normInfo(info)) {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", info, enc, again, err)
		}
	})
}

func normInfo(i memberInfo) memberInfo {
	if len(i.Standby) == 0 {
		i.Standby = nil
	}
	return i
}

// FuzzParseSyncAssignment feeds arbitrary bytes to the parse of this
// member's SyncGroup assignment: a result or an error, never a panic, and
// the partitions returned are the assignment's.
func FuzzParseSyncAssignment(f *testing.F) {
	good := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "a", []int32{0, 2}
	good.Topics = append(good.Topics, at)
	good.UserData = []byte(`{"version":1,"owners":{"a":{"0":"h:1","2":"h:2"}},"standby":{"a":[1]}}`)
	f.Add(good.AppendTo(nil))
	good.UserData = []byte(`{"owners":{"a":{"-3":"h"}}}`)
	f.Add(good.AppendTo(nil))
	good.UserData = []byte(`{`)
	f.Add(good.AppendTo(nil))
	f.Add([]byte{0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		bal := &copartitionBalancer{}
		got, err := bal.ParseSyncAssignment(b)
		if err != nil {
			return
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(b); err != nil {
			t.Fatalf("parsed what kmsg rejects: %v", err)
		}
		n := 0
		for _, ps := range got {
			n += len(ps)
		}
		want := 0
		for _, tp := range a.Topics {
			want += len(tp.Partitions)
		}
		if len(a.Topics) > 0 && len(got) == 0 || n > want {
			t.Fatalf("got %v from %v", got, a.Topics)
		}
		for g, ps := range bal.standbyTasks() {
			for _, p := range ps {
				if p < 0 {
					t.Fatalf("standby partition %d of %s", p, g)
				}
			}
		}
	})
}

// fuzzBalancer is a balancer for a topology where topics a and c are
// co-partitioned (one task group) and x is a group of its own.
func fuzzBalancer(t testing.TB, standbys int) *copartitionBalancer {
	b := NewBuilder()
	Count(GroupByKey(Stream(b, "a", String(), String()).Merge(Stream(b, "c", String(), String())), String(), String()), "ac")
	Stream(b, "x", String(), String()).To("y", String(), String())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	bal := newCopartitionBalancer(topo, "app", "")
	bal.standbys = standbys
	return bal
}

// fuzzMembers builds up to 8 members' JoinGroup metadata: member i
// subscribes to a, c and x unless bit i of narrow is set (then only a and
// x: another topology); owned holds (member, topic, partition) triples
// two bytes each; userData is split on '|' into the members' UserData.
func fuzzMembers(n, narrow uint8, owned, userData []byte) []kmsg.JoinGroupResponseMember {
	n = n%8 + 1
	names := []string{"a", "c", "x"}
	metas := make([]kmsg.ConsumerMemberMetadata, n)
	for i := range metas {
		metas[i] = kmsg.NewConsumerMemberMetadata()
		metas[i].Version = 2
		metas[i].Generation = int32(i % 3)
		metas[i].Topics = []string{"a", "c", "x"}
		if narrow&(1<<i) != 0 {
			metas[i].Topics = []string{"a", "x"}
		}
	}
	for j := 0; j+1 < len(owned); j += 2 {
		m := &metas[int(owned[j])%int(n)]
		topic := names[int(owned[j]>>3)%3]
		p := int32(int8(owned[j+1])) // negative and out of range too
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = topic, []int32{p}
		m.OwnedPartitions = append(m.OwnedPartitions, o)
	}
	for i, ud := range bytes.Split(userData, []byte("|")) {
		if i < int(n) {
			metas[i].UserData = ud
		}
	}
	out := make([]kmsg.JoinGroupResponseMember, n)
	for i := range out {
		out[i] = kmsg.NewJoinGroupResponseMember()
		out[i].MemberID = fmt.Sprintf("m%d", i)
		out[i].ProtocolMetadata = metas[i].AppendTo(nil)
	}
	return out
}

// FuzzBalance balances members with arbitrary owned partitions,
// subscriptions and UserData: either a clear error (no member subscribes
// to all of a task's topics) or a plan where every partition goes to
// exactly one member, a task's co-partitioned partitions to one member
// subscribed to them all, each member holds its fair share when all
// subscribe alike, and standbys are distinct members other than the
// owner, as many as asked and possible. The cooperative assignment sent
// out is the plan minus partitions another member must revoke first.
func FuzzBalance(f *testing.F) {
	f.Add(uint8(2), uint8(0), uint8(3), uint8(3), uint8(1), []byte{0, 0, 1, 1}, []byte(`{"standby":{"app-a":[0]}}|{"endpoint":"h:2"}`))
	f.Add(uint8(0), uint8(0), uint8(1), uint8(0), uint8(0), []byte{}, []byte{})
	f.Add(uint8(3), uint8(2), uint8(4), uint8(2), uint8(5), []byte{8, 3, 9, 200, 1, 0}, []byte(`garbage|{"standby":{"a":[0,0,1,99]}}`))
	f.Add(uint8(1), uint8(1), uint8(2), uint8(2), uint8(1), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, n, narrow, pa, px, standbys uint8, owned, userData []byte) {
		bal := fuzzBalancer(t, int(standbys%4))
		members := fuzzMembers(n, narrow, owned, userData)
		parts := map[string]int32{"a": int32(pa % 33), "c": int32(pa % 33), "x": int32(px % 33)}
		cb, err := kgo.NewConsumerBalancer(bal, members)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := bal.plan(cb, parts)
		if err != nil {
			if !errors.Is(err, ErrGroupProtocol) {
				t.Fatalf("error %v does not wrap ErrGroupProtocol", err)
			}
			return
		}
		checkPlan(t, members, parts, tp, int(standbys%4))

		into, err := cb.BalanceOrError(parts)
		if err != nil {
			t.Fatal(err)
		}
		sent := map[string]string{}
		for _, a := range into.IntoSyncAssignment() {
			got, err := bal.ParseSyncAssignment(a.MemberAssignment)
			if err != nil {
				t.Fatal(err)
			}
			for topic, ps := range got {
				for _, p := range ps {
					tpn := fmt.Sprintf("%s/%d", topic, p)
					if prev, dup := sent[tpn]; dup {
						t.Fatalf("%s sent to %s and %s", tpn, prev, a.MemberID)
					}
					sent[tpn] = a.MemberID
				}
			}
		}
		for _, k := range tp.keys {
			for _, topic := range tp.topics[k] {
				tpn := fmt.Sprintf("%s/%d", topic, k.partition)
				want := members[tp.assigned[k]].MemberID
				if got, ok := sent[tpn]; ok && got != want {
					t.Fatalf("%s sent to %s, planned for %s", tpn, got, want)
				}
			}
		}
	})
}

func checkPlan(t *testing.T, members []kmsg.JoinGroupResponseMember, parts map[string]int32, tp *taskPlan, standbys int) {
	t.Helper()
	n := len(members)
	subs := make([]map[string]bool, n)
	for i, m := range members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			t.Fatal(err)
		}
		subs[i] = map[string]bool{}
		for _, topic := range meta.Topics {
			subs[i][topic] = true
		}
	}
	subscribed := map[string]bool{}
	for _, s := range subs {
		for topic := range s {
			subscribed[topic] = true
		}
	}
	owner := map[string]int{}
	load := make([]int, n)
	for _, k := range tp.keys {
		i, ok := tp.assigned[k]
		if !ok || i < 0 || i >= n {
			t.Fatalf("task %v assigned to %d (ok %v)", k, i, ok)
		}
		load[i]++
		for _, topic := range tp.topics[k] {
			if !subs[i][topic] {
				t.Fatalf("task %v to member %d, not subscribed to %s", k, i, topic)
			}
			tpn := fmt.Sprintf("%s/%d", topic, k.partition)
			if _, dup := owner[tpn]; dup {
				t.Fatalf("%s assigned twice", tpn)
			}
			owner[tpn] = i
		}
		sb := tp.standbys[k]
		able := 0 // members other than the owner that could hold a standby
		for m := range n {
			all := m != i
			for _, topic := range tp.topics[k] {
				all = all && subs[m][topic]
			}
			if all {
				able++
			}
		}
		if want := min(standbys, able); len(sb) != want {
			t.Fatalf("task %v has %d standbys %v, want %d", k, len(sb), sb, want)
		}
		seen := map[int]bool{}
		for _, s := range sb {
			if s == i || s < 0 || s >= n || seen[s] {
				t.Fatalf("task %v owned by %d has standbys %v", k, i, sb)
			}
			seen[s] = true
		}
	}
	total := 0
	for topic, np := range parts {
		if !subscribed[topic] {
			continue
		}
		for p := range np {
			if _, ok := owner[fmt.Sprintf("%s/%d", topic, p)]; !ok {
				t.Fatalf("%s/%d assigned to nobody", topic, p)
			}
			total++
		}
	}
	if total != len(owner) {
		t.Fatalf("%d partitions assigned, %d exist", len(owner), total)
	}
	if subscribed["c"] {
		for p := range parts["a"] {
			a, c := fmt.Sprintf("a/%d", p), fmt.Sprintf("c/%d", p)
			if owner[a] != owner[c] {
				t.Fatalf("%s on %d, %s on %d", a, owner[a], c, owner[c])
			}
		}
	}
	alike := true
	for _, s := range subs {
		alike = alike && len(s) == len(subs[0])
	}
	if alike {
		base := len(tp.keys) / n
		for i, l := range load {
			if l < base || l > base+1 {
				t.Fatalf("member %d has %d tasks, fair share %d or one more: %v", i, l, base, load)
			}
		}
	}
}
