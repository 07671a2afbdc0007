package cluster

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// Issue 18: a brief etcd stall must not turn into a cluster-wide
// re-election. Leaderships belong to a broker's holding, not to its etcd
// session: a broker whose session expired in the stall registers a new
// one and keeps its partitions (docs/cluster.md, "Leadership").

// leasePartitions is the size of the many-partition topic: enough that
// re-claiming everything after a stall would show, small enough for CI.
const leasePartitions = 3000

// leaderEpoch is one partition's leader and leader epoch from Metadata.
type leaderEpoch struct{ leader, epoch int32 }

// allLeaders returns every partition of every topic with its leader, once
// every one has a leader.
func allLeaders(t *testing.T, adm *kadm.Client) map[string]leaderEpoch {
	t.Helper()
	var out map[string]leaderEpoch
	testbroker.Eventually(t, 3*time.Minute, "every partition led", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx)
		if err != nil {
			return err
		}
		out = map[string]leaderEpoch{}
		for _, td := range md.Topics {
			if td.Err != nil {
				return fmt.Errorf("topic %s: %v", td.Topic, td.Err)
			}
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 {
					return fmt.Errorf("%s-%d: leader %d, %v", td.Topic, p.Partition, p.Leader, p.Err)
				}
				out[fmt.Sprintf("%s-%d", td.Topic, p.Partition)] = leaderEpoch{p.Leader, p.LeaderEpoch}
			}
		}
		return nil
	})
	return out
}

// leaseCluster is a three-broker cluster with the many-partition topic and
// a producer running on a small one.
type leaseCluster struct {
	c   *testcluster.Cluster
	adm *kadm.Client
	hc  *http.Client
	*load
}

func startLeaseCluster(t *testing.T, opts testcluster.Options) *leaseCluster {
	t.Helper()
	c := testcluster.Start(t, opts)
	seeds := c.Addrs()
	adm := kadm.NewClient(testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	ensureTopic(t, adm, "lease-many", leasePartitions)
	createTopic(t, seeds, "lease-load")
	ld := &load{c: c, topic: "lease-load", l: newLoadLog(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() { defer close(ld.done); produceUntil(t, seeds, ld.topic, ld.stop, ld.l) }()
	waitProgress(t, ld.l, "produce before any fault")
	return &leaseCluster{c: c, adm: adm, hc: &http.Client{Timeout: 30 * time.Second}, load: ld}
}

// metric sums one metric over the running brokers (index -> value).
func (lc *leaseCluster) metric(t *testing.T, name string) map[int]float64 {
	t.Helper()
	out := map[int]float64{}
	for i := range lc.c.Len() {
		if exited, _ := lc.c.Broker(i).Exited(); exited {
			continue
		}
		m, err := scrapeProm(lc.hc, lc.c.AdminAddr(i))
		if err != nil {
			t.Fatalf("scraping broker %d: %v", testcluster.NodeID(i), err)
		}
		out[i] = m.sum(name)
	}
	return out
}

// checkOneLeader: the partitions every running broker says it leads and
// serves add up to the partitions Metadata lists, and each broker leads
// exactly those Metadata names it the leader of, so no partition is led
// twice.
func (lc *leaseCluster) checkOneLeader(t *testing.T) {
	t.Helper()
	testbroker.Eventually(t, time.Minute, "each partition led by exactly one broker", func() error {
		leaders := allLeaders(t, lc.adm)
		per := map[int32]int{}
		for _, le := range leaders {
			per[le.leader]++
		}
		led := lc.metric(t, "sluice_cluster_partitions_led")
		total := 0
		for i, n := range led {
			total += int(n)
			if id := testcluster.NodeID(i); int(n) != per[id] {
				return fmt.Errorf("broker %d leads %d partitions, Metadata names it for %d", id, int(n), per[id])
			}
		}
		if total != len(leaders) {
			return fmt.Errorf("the brokers lead %d partitions, Metadata lists %d", total, len(leaders))
		}
		return nil
	})
}

// TestClusterEtcdPauseKeepsLeaders: etcd is paused (SIGSTOP) for longer
// than the lease TTL under produce load, with 3,000 partitions. Every
// broker's session expires when etcd runs again; each registers a new one
// for its holding and keeps its partitions at the same epochs. Afterwards
// every partition has exactly one leader, few (here none are expected)
// changed leader or epoch, and every acknowledged record is read back once,
// in order. Before holdings, every partition was released and claimed
// again at a new epoch.
func TestClusterEtcdPauseKeepsLeaders(t *testing.T) {
	lc := startLeaseCluster(t, testcluster.Options{EtcdProcess: true})
	before := allLeaders(t, lc.adm)
	resumed := lc.metric(t, "sluice_cluster_sessions_resumed_total")

	lc.c.Etcd().Pause(t)
	time.Sleep(2*testcluster.DefaultLeaseTTL + time.Second)
	lc.c.Etcd().Resume(t)
	waitProgress(t, lc.l, "produce after the etcd pause")
	testbroker.Eventually(t, time.Minute, "every broker on a new session for its holding", func() error {
		now := lc.metric(t, "sluice_cluster_sessions_resumed_total")
		for i, n := range now {
			if n <= resumed[i] {
				return fmt.Errorf("broker %d: %v sessions resumed, %v before the pause", testcluster.NodeID(i), n, resumed[i])
			}
		}
		return nil
	})

	after := allLeaders(t, lc.adm)
	changed := 0
	for tp, le := range before {
		if after[tp] != le {
			changed++
		}
	}
	t.Logf("%d of %d partitions changed leader or epoch across a %v etcd pause", changed, len(before), 2*testcluster.DefaultLeaseTTL+time.Second)
	if changed > len(before)/100 {
		t.Errorf("%d of %d partitions changed leader or epoch: the stall became a re-election", changed, len(before))
	}
	lc.checkOneLeader(t)
	lc.finish(t)
	checkRetriable(t, lc.l)
}

// TestClusterDeadBrokerTakenOver: a broker SIGKILLed for good has its
// partitions (a third of 3,000) taken over by the other two, claimed at
// the claim rate, while a producer runs; every acknowledged record is read
// back. The take-over time is logged, not asserted.
func TestClusterDeadBrokerTakenOver(t *testing.T) {
	lc := startLeaseCluster(t, testcluster.Options{})
	before := allLeaders(t, lc.adm)
	const victim = 2
	dead := testcluster.NodeID(victim)
	var theirs []string
	for tp, le := range before {
		if le.leader == dead {
			theirs = append(theirs, tp)
		}
	}
	lc.c.KillBroker(victim)
	killed := time.Now()
	var after map[string]leaderEpoch
	testbroker.Eventually(t, 3*time.Minute, "the dead broker's partitions led elsewhere", func() error {
		after = allLeaders(t, lc.adm)
		for _, tp := range theirs {
			if after[tp].leader == dead {
				return fmt.Errorf("%s still led by the dead broker %d", tp, dead)
			}
		}
		return nil
	})
	t.Logf("%d partitions of the killed broker led elsewhere %v after the kill", len(theirs), time.Since(killed).Round(10*time.Millisecond))
	for _, tp := range theirs {
		if after[tp].epoch <= before[tp].epoch {
			t.Errorf("%s: epoch %d after the take-over, %d before", tp, after[tp].epoch, before[tp].epoch)
		}
	}
	waitProgress(t, lc.l, "produce after the take-over")
	lc.checkOneLeader(t)
	lc.finish(t)
}
