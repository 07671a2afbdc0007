package diagnose

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/lag"
)

func TestPowerOfTwo(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want int32
	}{{0, 1}, {0.5, 1}, {1, 1}, {1.01, 2}, {30, 32}, {32, 32}, {33, 64}, {1e12, 1 << 30}} {
		if got := powerOfTwo(c.x); got != c.want {
			t.Errorf("powerOfTwo(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func TestSlowProcessing(t *testing.T) {
	slow := []PartitionRate{{Topic: "t", Partition: 0, Lag: 10, ProduceRate: 100, ConsumeRate: 20},
		{Topic: "t", Partition: 1, Lag: 12, ProduceRate: 90, ConsumeRate: 25}}
	if _, ok := slowProcessing(slow, true); !ok {
		t.Fatal("consumption below production everywhere is slow processing")
	}
	oneKeeps := append([]PartitionRate{}, slow...)
	oneKeeps[1].ConsumeRate = 200
	if _, ok := slowProcessing(oneKeeps, true); ok {
		t.Fatal("one partition keeping up is not slow processing everywhere")
	}
	if _, ok := slowProcessing([]PartitionRate{{Topic: "t", Lag: 0}}, true); ok {
		t.Fatal("no traffic is not slow processing")
	}
}

func TestSickConsumer(t *testing.T) {
	g := lag.GroupLag{Group: "g", State: "Stable", Members: 2, Generation: 4, Assignments: []lag.Member{
		{ID: "m1", ClientID: "good", Assigned: []lag.TopicPartition{{Topic: "t", Partition: 0}}},
		{ID: "m2", ClientID: "bad", Assigned: []lag.TopicPartition{{Topic: "t", Partition: 1}}},
	}}
	rs := []PartitionRate{{Topic: "t", Partition: 0, Lag: 5, ConsumeRate: 50, Owner: "m1", Status: lag.OK},
		{Topic: "t", Partition: 1, Lag: 500, ConsumeRate: 0, Owner: "m2", Status: lag.Stopped}}
	f, ok := sickConsumer(g, g, rs, true)
	if !ok || len(f.Evidence) != 1 {
		t.Fatalf("a member holding lag and committing nothing: %+v %v", f, ok)
	}
	rs[1].ConsumeRate = 10
	rs[1].Status = lag.Warning
	if f, ok := sickConsumer(g, g, rs, true); ok {
		t.Fatalf("both members progress: %+v", f)
	}
	moved := g
	moved.Generation = 5
	if f, ok := sickConsumer(g, moved, rs, true); !ok || f.Summary != "the group keeps rebalancing" {
		t.Fatalf("a rebalance during the sample: %+v %v", f, ok)
	}
	empty := lag.GroupLag{Group: "g", State: "Empty"}
	if f, ok := sickConsumer(empty, empty, rs, true); !ok || f.Kind != SickConsumer {
		t.Fatalf("no members: %+v %v", f, ok)
	}
}

func TestBrokerFindings(t *testing.T) {
	d := Broker(BrokerFacts{FreeBytes: 100 << 20, MinFreeBytes: 128 << 20, Refusing: "produce", RefusedProduce: 3,
		RollSegmentLimit: 8, RSSBytes: 1 << 30, BudgetBytes: 4 << 30}, []lag.GroupLag{{Group: "x", Status: lag.Stopped}})
	if d.Status != "critical" || d.Findings[0].Area != "disk" || d.Findings[0].Severity != "critical" {
		t.Fatalf("refusing produce: %+v", d)
	}
	if d.Groups["STOPPED"] != 1 || d.Findings[len(d.Findings)-1].Severity != "warning" {
		t.Fatalf("groups: %+v", d)
	}
	ok := Broker(BrokerFacts{FreeBytes: 100 << 30, MinFreeBytes: 128 << 20, RollSegmentLimit: 8}, nil)
	if ok.Status != "ok" {
		t.Fatalf("healthy broker: %+v", ok)
	}
}
