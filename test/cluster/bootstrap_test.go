package cluster

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterSimultaneousStarts: eight broker processes started at the
// same moment on an empty etcd, twenty times over. Every one comes up (a
// tester saw one of three exit once in six tries, having lost the race to
// store the cluster id; before the fix this test lost brokers that way in
// most runs), and every one reports the same cluster id and all eight
// brokers.
func TestClusterSimultaneousStarts(t *testing.T) {
	const brokers = 8
	for round := range 20 {
		t.Run(fmt.Sprint(round+1), func(t *testing.T) {
			c := testcluster.Start(t, testcluster.Options{Brokers: brokers, Together: true})
			var id string
			for i := 0; i < c.Len(); i++ {
				cl := testbroker.NewClient(t, c.Broker(i).Addr())
				testbroker.Eventually(t, 30*time.Second, fmt.Sprintf("broker %d lists every broker", i+1), func() error {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					// The seed: this broker, whatever the client learned since.
					resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(math.MinInt32))
					if err != nil {
						return err
					}
					if resp.ClusterID == nil || *resp.ClusterID == "" {
						return fmt.Errorf("no cluster id")
					}
					if id == "" {
						id = *resp.ClusterID
					}
					if *resp.ClusterID != id {
						t.Fatalf("broker %d reports cluster id %q, broker 1 %q", i+1, *resp.ClusterID, id)
					}
					if len(resp.Brokers) != brokers {
						return fmt.Errorf("%d brokers listed", len(resp.Brokers))
					}
					return nil
				})
			}
		})
	}
}
