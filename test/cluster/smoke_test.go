package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterSmoke: a topic created through one broker is produced to and
// read back through the cluster.
func TestClusterSmoke(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	createTopic(t, seeds, "smoke")
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < 60; i++ {
		recs = append(recs, &kgo.Record{Topic: "smoke", Partition: int32(i % partitions), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := testbroker.ReadAll(t, seeds[0], "smoke", kgo.SeedBrokers(seeds...))
	n := 0
	for _, rs := range got {
		n += len(rs)
	}
	if n != 60 {
		t.Fatalf("read %d records, want 60", n)
	}
}
