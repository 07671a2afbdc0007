package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterSASLListeners: brokers with a PLAINTEXT and a SASL_PLAINTEXT
// listener register both endpoints; a client that bootstraps through one
// broker's SASL listener is told every broker's SASL address, and
// produces to and consumes from partitions led across the cluster, logged
// in with SCRAM against credentials every broker reads from etcd.
func TestClusterSASLListeners(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Brokers: 3, SASLUsers: []string{"app:app-secret"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const partitions = 6
	topic := fmt.Sprintf("sasl-%d", time.Now().UnixNano())
	testbroker.CreateTopic(t, c.Addrs()[0], topic, partitions, nil)

	auth := kgo.SASL(scram.Auth{User: "app", Pass: "app-secret"}.AsSha256Mechanism())
	cl := testbroker.NewClient(t, c.SASLAddr(0), auth, kgo.DefaultProduceTopic(topic))
	want := map[int32]string{}
	for i := range c.Len() {
		_, port, _ := net.SplitHostPort(c.SASLAddr(i))
		want[testcluster.NodeID(i)] = port
	}
	testbroker.Eventually(t, time.Minute, "SASL endpoints of every broker in metadata", func() error {
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if len(md.Brokers) != c.Len() {
			return fmt.Errorf("%d brokers", len(md.Brokers))
		}
		for _, b := range md.Brokers {
			if strconv.Itoa(int(b.Port)) != want[b.NodeID] {
				return fmt.Errorf("broker %d advertised on port %d, want its SASL port %s", b.NodeID, b.Port, want[b.NodeID])
			}
		}
		return nil
	})

	var recs []*kgo.Record
	for p := range int32(partitions) {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(p))})
	}
	pcl := testbroker.NewClient(t, c.SASLAddr(0), auth, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing through SASL: %v", err)
	}
	got := testbroker.ReadAll(t, c.SASLAddr(1), topic, auth)
	n := 0
	for _, rs := range got {
		n += len(rs)
	}
	if n != partitions {
		t.Fatalf("read %d records through broker 2's SASL listener, want %d", n, partitions)
	}
}
