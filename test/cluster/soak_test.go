package cluster

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testcluster"
)

// soakEnv sets how long TestClusterSoak runs (a Go duration); unset, the
// test is skipped: it is for long runs, not CI.
const soakEnv = "SLUICE_CLUSTER_SOAK"

// soakFault is one step of the soak's fault rotation. It returns once the
// fault is over (the component is back); the soak then waits for produce
// progress before the next.
type soakFault struct {
	name string
	run  func(t *testing.T, c *testcluster.Cluster, round int)
}

var soakFaults = []soakFault{
	{"SIGKILL a broker", func(t *testing.T, c *testcluster.Cluster, round int) {
		i := round % c.Len()
		c.KillBroker(i)
		time.Sleep(2 * testcluster.DefaultLeaseTTL)
		c.RestartBroker(i)
	}},
	{"every session expires (etcd down for twice the lease TTL)", func(t *testing.T, c *testcluster.Cluster, _ int) {
		c.Etcd().Stop()
		time.Sleep(2 * testcluster.DefaultLeaseTTL)
		c.Etcd().Start(t)
	}},
	{"object store stopped for 10 s", func(t *testing.T, c *testcluster.Cluster, _ int) {
		c.S3().Stop()
		time.Sleep(10 * time.Second)
		c.S3().Restart()
	}},
	{"graceful broker restart", func(t *testing.T, c *testcluster.Cluster, round int) {
		c.RestartBroker(round % c.Len())
	}},
	{"object store paused for 3 s", func(t *testing.T, c *testcluster.Cluster, _ int) {
		c.S3().Pause()
		time.Sleep(3 * time.Second)
		c.S3().Resume()
	}},
	{"etcd restarted", func(t *testing.T, c *testcluster.Cluster, _ int) {
		c.Etcd().Restart(t)
	}},
}

// TestClusterSoak runs two idempotent acks=all producers and a two-member
// consumer group against three brokers while faults rotate (broker kills,
// every session expiring at once, object store outages and stalls, graceful
// restarts, etcd restarts) for SLUICE_CLUSTER_SOAK, e.g.
//
//	SLUICE_CLUSTER_SOAK=20m go test ./test/cluster/ -run TestClusterSoak -v -timeout 60m
//
// At the end every acknowledged record of both producers is in the log
// exactly once, in order per partition, and the group consumed all of them.
func TestClusterSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(soakEnv))
	if err != nil || d <= 0 {
		t.Skipf("set %s to a duration to soak, e.g. %s=20m go test ./test/cluster/ -run TestClusterSoak -v -timeout 60m", soakEnv, soakEnv)
	}
	const topic = "soak"
	ld := startLoad(t, topic)
	keepLogs(t, ld.c)
	other := newLoadLog()
	other.prefix = "q"
	stop2, done2 := make(chan struct{}), make(chan struct{})
	seeds := ld.c.Addrs()
	go func() { defer close(done2); produceUntil(t, seeds, topic, stop2, other) }()
	stopConsumers := make(chan struct{})
	var seen sync.Map
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); consumeGroup(t, seeds, topic, "soakers", stopConsumers, &seen) }()
	}

	deadline := time.Now().Add(d)
	for round := 0; time.Now().Before(deadline) && !t.Failed(); round++ {
		f := soakFaults[round%len(soakFaults)]
		began := time.Now()
		f.run(t, ld.c, round/len(soakFaults))
		waitProgress(t, ld.l, "produce after: "+f.name)
		waitProgress(t, other, "second producer after: "+f.name)
		t.Logf("round %d: %s; produce resumed %v after it began; acknowledged so far %d + %d",
			round, f.name, time.Since(began).Round(100*time.Millisecond), ld.l.count(), other.count())
	}

	close(stop2)
	<-done2
	close(ld.stop)
	<-ld.done
	waitConsumed(t, 3*time.Minute, &seen, ld.l, other)
	close(stopConsumers)
	wg.Wait()
	checkLog(t, ld.c.Addrs(), topic, ld.l)
	checkLog(t, ld.c.Addrs(), topic, other)
}
