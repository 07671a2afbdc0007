package delay

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterKillHolder runs three brokers on etcd and S3, produces
// delayed records to every partition of a topic (held on whichever broker
// leads each store partition, forwarded there when that is not the
// target's leader), SIGKILLs the broker leading the most store partitions
// before they are due, and checks that every record is still delivered,
// once, and not early.
func TestClusterKillHolder(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	const topic, partitions = "cluster-delayed", 6
	testbroker.CreateTopic(t, seeds[0], topic, partitions, nil)
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const delayFor = 6 * time.Second
	// The store is created by the first delayed record; wait until every
	// partition of it has a leader before the timed part.
	first := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("cl-first"),
		Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte("1")}}}
	if err := cl.ProduceSync(ctx, first).FirstErr(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	var want []expect
	start := time.Now()
	want = append(want, expect{"cl-first", start.Add(-time.Minute)})
	var recs []*kgo.Record
	for i := range 120 {
		v := fmt.Sprintf("cl-%d", i)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte(strconv.FormatInt(delayFor.Milliseconds(), 10))}}})
		want = append(want, expect{v, start.Add(delayFor)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if time.Since(start) > delayFor-time.Second {
		t.Logf("producing took %v: some records may have fallen due before the kill", time.Since(start))
	}

	// The broker leading the most store partitions that hold records.
	idx, victim, held := storeVictim(t, ctx, c, cl, topic, partitions)
	most := len(held)
	t.Logf("killing broker %d, leader of the store partitions of %d of %d target partitions", victim, most, partitions)
	c.KillBroker(idx)

	var live []string
	for i, a := range seeds {
		if i != idx {
			live = append(live, a)
		}
	}
	cons := consume(t, live[0], topic)
	check(t, cons, want, 90*time.Second)
}
