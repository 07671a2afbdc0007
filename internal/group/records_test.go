package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPartitionFor checks Kafka's mapping against Java's String.hashCode:
// "polygenelubricants" hashes to Integer.MIN_VALUE, which Utils.abs maps to 0.
func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group string
		n     int32
		want  int32
	}{
		{"", 50, 0},
		{"a", 50, 97 % 50},
		{"hello", 50, 99162322 % 50},
		{"polygenelubricants", 50, 0},
	} {
		if got := partitionFor(tc.group, tc.n); got != tc.want {
			t.Errorf("partitionFor(%q, %d) = %d, want %d", tc.group, tc.n, got, tc.want)
		}
	}
	// Negative hashes take the absolute value (Java's Math.abs).
	for _, g := range []string{"zzzzzzzz", "consumer-group-1", "ÿÿÿÿÿÿÿ"} {
		var h int32
		for _, c := range g {
			h = 31*h + c
		}
		want := h
		if want < 0 {
			want = -want
		}
		if got := partitionFor(g, 50); got != want%50 {
			t.Errorf("partitionFor(%q) = %d, want %d (hash %d)", g, got, want%50, h)
		}
	}
}

// TestRecordRoundTrip encodes group and offset records and decodes them.
func TestRecordRoundTrip(t *testing.T) {
	c := &Coordinator{}
	g := newGroup(c, "g1", 3, time.UnixMilli(1234))
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "range", 7, "m1"
	inst := "i1"
	m := &member{id: "m1", instanceID: &inst, clientID: "c", clientHost: "/h", sessionTimeout: 10 * time.Second,
		rebalanceTimeout: 30 * time.Second, protocols: []Protocol{{"range", []byte("sub")}}, assignment: []byte("as")}
	g.members["m1"] = m
	g.order = []string{"m1"}
	d, err := decodeRecord(groupKey("g1"), groupValue(g, nil, time.Now()))
	if err != nil || d.kind != 2 || d.group != "g1" || d.meta == nil {
		t.Fatalf("group record: %+v, %v", d, err)
	}
	v := d.meta
	if v.Generation != 7 || *v.Protocol != "range" || *v.Leader != "m1" || len(v.Members) != 1 ||
		string(v.Members[0].Subscription) != "sub" || string(v.Members[0].Assignment) != "as" || *v.Members[0].InstanceID != "i1" {
		t.Errorf("group value decoded as %+v", v)
	}
	e := &offsetEntry{Offset: 42, LeaderEpoch: 3, Metadata: "md", CommitTime: 99, ExpireTime: -1}
	d, err = decodeRecord(offsetKey("g1", "t", 5), offsetValue(e))
	if err != nil || d.kind != 1 || d.tp != (tp{"t", 5}) || d.offset.Offset != 42 || d.offset.LeaderEpoch != 3 || d.offset.Metadata != "md" {
		t.Errorf("offset record: %+v %+v, %v", d, d.offset, err)
	}
	e.ExpireTime = 500
	d, _ = decodeRecord(offsetKey("g1", "t", 5), offsetValue(e))
	if d.offset.Version != 1 || d.offset.ExpireTimestamp != 500 {
		t.Errorf("offset with expiry decoded as %+v", d.offset)
	}
	if d, err := decodeRecord(offsetKey("g1", "t", 5), nil); err != nil || d.offset != nil || d.kind != 1 {
		t.Errorf("tombstone: %+v %v", d, err)
	}
}

// FuzzDecodeRecord: records read back from the offsets topic never crash
// the decoder.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(offsetKey("g", "t", 1), offsetValue(&offsetEntry{Offset: 1, ExpireTime: -1}))
	f.Add(groupKey("g"), []byte(nil))
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	f.Add(groupKey("g"), v.AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		decodeRecord(key, value)
	})
}
