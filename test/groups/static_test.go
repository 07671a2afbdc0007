package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestStaticMemberRestart: a static member (group.instance.id) that
// restarts within its session timeout takes its place back without a
// rebalance: the generation does not change, the other member is not
// disturbed, and the old member id is fenced.
func TestStaticMemberRestart(t *testing.T) {
	b := startBroker(t)
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	produce(t, b.Addr(), topic, "v", 100)
	into := &consumed{seen: map[string]int{}}
	static := func(id string) *kgoMember {
		// An eager balancer: cooperative-sticky follows a rebalance with a
		// second round, so a "stable" generation seen between the two would
		// not be the final one.
		return startKgoMember(t, b.Addr(), grp, topic, into, kgo.InstanceID(id), kgo.SessionTimeout(30*time.Second),
			kgo.Balancers(kgo.RoundRobinBalancer()))
	}
	m1, m2 := static("inst-1"), static("inst-2")
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	var gen int32
	testbroker.Eventually(t, time.Minute, "both static members in one stable generation", func() error {
		d := describe(t, adm, grp)
		_, g1 := m1.cl.GroupMetadata()
		_, g2 := m2.cl.GroupMetadata()
		if d.State != "Stable" || len(d.Members) != 2 || g1 != g2 || g1 <= 0 {
			return fmt.Errorf("state %s, %d members, generations %d and %d", d.State, len(d.Members), g1, g2)
		}
		gen = g1
		return nil
	})
	waitCommitted(t, b.Addr(), grp, topic, time.Minute)
	oldID, _ := m1.cl.GroupMetadata()

	// franz-go does not send LeaveGroup for static members on close.
	m1.stop(false)
	m1b := static("inst-1")
	testbroker.Eventually(t, time.Minute, "restarted static member back in the group", func() error {
		id, g := m1b.cl.GroupMetadata()
		if g <= 0 || id == "" {
			return fmt.Errorf("not joined yet (generation %d)", g)
		}
		if id == oldID {
			return fmt.Errorf("member id unchanged")
		}
		if g != gen {
			return fmt.Errorf("generation %d after the restart, was %d: the group rebalanced", g, gen)
		}
		return nil
	})
	if _, g2 := m2.cl.GroupMetadata(); g2 != gen {
		t.Errorf("the other member is at generation %d, was %d", g2, gen)
	}
	d := describe(t, adm, grp)
	if d.State != "Stable" || len(d.Members) != 2 {
		t.Errorf("after the restart: state %s with %d members", d.State, len(d.Members))
	}

	// The old member id is fenced.
	cl := testbroker.NewClient(t, b.Addr())
	hb := &kmsgHeartbeat{group: grp, member: oldID, instance: "inst-1", generation: gen}
	if code := hb.send(t, cl); code != 82 {
		t.Errorf("heartbeat with the old member id: error code %d, want FENCED_INSTANCE_ID (82)", code)
	}

	// New records still reach the group.
	produce(t, b.Addr(), topic, "w", 100)
	waitCommitted(t, b.Addr(), grp, topic, time.Minute)
	if miss := into.missing("w", 100); len(miss) > 0 {
		t.Errorf("%d records after the restart never consumed", len(miss))
	}
}
