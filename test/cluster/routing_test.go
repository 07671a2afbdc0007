package cluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterStaleRouting: requests sent to a broker that does not lead the
// partition get NOT_LEADER_OR_FOLLOWER; a stale leader epoch gets
// FENCED_LEADER_EPOCH; after a failover OffsetForLeaderEpoch for the old
// epoch answers where that epoch ended.
func TestClusterStaleRouting(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	createTopic(t, seeds, "routing")
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	leader := func() (int32, int32) {
		var id, epoch int32
		testbroker.Eventually(t, time.Minute, "partition 0 led", func() error {
			md, err := adm.Metadata(ctx, "routing")
			if err != nil {
				return err
			}
			p := md.Topics["routing"].Partitions[0]
			if p.Err != nil {
				return p.Err
			}
			id, epoch = p.Leader, p.LeaderEpoch
			return nil
		})
		return id, epoch
	}
	lead, epoch := leader()
	var other int32 = -1
	for i := 0; i < c.Len(); i++ {
		if id := testcluster.NodeID(i); id != lead {
			other = id
			break
		}
	}

	// Produce to a follower.
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "routing", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "routing"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 0
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	resp, err := preq.RequestWith(ctx, cl.Broker(int(other)))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to follower %d: error %d, want NOT_LEADER_OR_FOLLOWER", other, code)
	}
	// KIP-951: the answer names the leader and its endpoint.
	checkLeaderHint(t, "produce to a follower", resp.Topics[0].Partitions[0].CurrentLeader.LeaderID,
		resp.Topics[0].Partitions[0].CurrentLeader.LeaderEpoch, lead, epoch, len(resp.Brokers), func(i int) (int32, string, int32) {
			return resp.Brokers[i].NodeID, resp.Brokers[i].Host, resp.Brokers[i].Port
		}, c)

	// Fetch from the leader with an older epoch.
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MaxBytes = 10, 1<<20
	md, err := adm.Metadata(ctx, "routing")
	if err != nil {
		t.Fatal(err)
	}
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "routing", md.Topics["routing"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = 0, epoch-1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl.Broker(int(lead)))
	if err != nil {
		t.Fatal(err)
	}
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("fetch with epoch %d (current %d): error %d, want FENCED_LEADER_EPOCH", epoch-1, epoch, code)
	}
	checkLeaderHint(t, "fetch with an old epoch", fresp.Topics[0].Partitions[0].CurrentLeader.LeaderID,
		fresp.Topics[0].Partitions[0].CurrentLeader.LeaderEpoch, lead, epoch, len(fresp.Brokers), func(i int) (int32, string, int32) {
			return fresp.Brokers[i].NodeID, fresp.Brokers[i].Host, fresp.Brokers[i].Port
		}, c)

	// Fail the leader over; the old epoch ended at offset 10.
	for i := 0; i < c.Len(); i++ {
		if testcluster.NodeID(i) == lead {
			c.KillBroker(i)
		}
	}
	var newLead, newEpoch int32
	testbroker.Eventually(t, time.Minute, "a new leader", func() error {
		newLead, newEpoch = leader()
		if newEpoch <= epoch || newLead == lead {
			return kerr.LeaderNotAvailable
		}
		return nil
	})
	oreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oreq.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "routing"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, newEpoch, epoch
	ot.Partitions = append(ot.Partitions, op)
	oreq.Topics = append(oreq.Topics, ot)
	testbroker.Eventually(t, time.Minute, "OffsetForLeaderEpoch on the new leader", func() error {
		oresp, err := oreq.RequestWith(ctx, cl.Broker(int(newLead)))
		if err != nil {
			return err
		}
		r := oresp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
		if r.LeaderEpoch != epoch || r.EndOffset != 10 {
			t.Fatalf("OffsetForLeaderEpoch(%d) = epoch %d end %d; want %d, 10", epoch, r.LeaderEpoch, r.EndOffset, epoch)
		}
		return nil
	})
}

// checkLeaderHint checks a KIP-951 answer: the current leader and epoch,
// and exactly that broker's endpoint among the response's brokers.
func checkLeaderHint(t *testing.T, what string, gotLead, gotEpoch, lead, epoch int32, nBrokers int, broker func(int) (int32, string, int32), c *testcluster.Cluster) {
	t.Helper()
	if gotLead != lead || gotEpoch != epoch {
		t.Errorf("%s: current leader %d epoch %d, want %d epoch %d", what, gotLead, gotEpoch, lead, epoch)
	}
	if nBrokers != 1 {
		t.Fatalf("%s: %d node endpoints, want the leader's", what, nBrokers)
	}
	id, host, port := broker(0)
	want := c.Broker(int(lead) - 1).Addr()
	if got := net.JoinHostPort(host, strconv.Itoa(int(port))); id != lead || got != want {
		t.Errorf("%s: node endpoint %d at %s, want %d at %s", what, id, got, lead, want)
	}
}
