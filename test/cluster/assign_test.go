package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// checkAssignments: replica lists given at creation and by a reassignment
// (AlterPartitionReassignments) are kept, reported by every broker in
// their order, and make the first of each list the partition's leader; the
// reassignment is complete at once (no data moves), and the data written
// before it is all there after it.
func checkAssignments(t *testing.T, seeds []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	n1, n2, n3 := testcluster.NodeID(0), testcluster.NodeID(1), testcluster.NodeID(2)
	const topic = "assigned"

	createAssigned(t, ctx, cl, seeds, topic, [][]int32{{n2}, {n3}})

	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce before the reassignment: %v", err)
	}

	target := [][]int32{{n3, n1}, {n1, n3}}
	var areq kadm.AlterPartitionAssignmentsReq
	for p, rs := range target {
		areq.Assign(topic, int32(p), rs)
	}
	ares, err := adm.AlterPartitionAssignments(ctx, areq)
	if err != nil {
		t.Fatal(err)
	}
	if err := ares.Error(); err != nil {
		t.Fatalf("reassign: %v", err)
	}
	lres, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lres[topic]); n != 0 {
		t.Fatalf("%d reassignments still in progress; want none (no data moves)", n)
	}
	expectReplicas(t, ctx, seeds, topic, target)

	// A list naming a broker that does not exist is refused.
	var bad kadm.AlterPartitionAssignmentsReq
	bad.Assign(topic, 0, []int32{n1, 99})
	bres, err := adm.AlterPartitionAssignments(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := bres.Error(); err != kerr.InvalidReplicaAssignment {
		t.Fatalf("reassign to broker 99: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}

	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce after the reassignment: %v", err)
	}
	got := testbroker.ReadAll(t, seeds[0], topic, kgo.SeedBrokers(seeds...))
	if len(got[0])+len(got[1]) != 40 {
		t.Fatalf("read %d+%d records after the reassignment, want 40", len(got[0]), len(got[1]))
	}
}

// createAssigned creates topic with replica list lists[p] for partition p
// and waits until every broker reports them.
func createAssigned(t *testing.T, ctx context.Context, cl *kgo.Client, seeds []string, topic string, lists [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range lists {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s with replica assignments: %v", topic, err)
	}
	expectReplicas(t, ctx, seeds, topic, lists)
}

// expectReplicas waits until every broker's Metadata reports want[p] as
// partition p's replicas and in-sync replicas, and its first as leader.
func expectReplicas(t *testing.T, ctx context.Context, seeds []string, topic string, want [][]int32) {
	t.Helper()
	for _, seed := range seeds {
		cl := testbroker.NewClient(t, seed)
		testbroker.Eventually(t, time.Minute, fmt.Sprintf("%s reports the replicas %v", seed, want), func() error {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			ps := resp.Topics[0].Partitions
			if len(ps) != len(want) {
				return fmt.Errorf("%d partitions", len(ps))
			}
			for _, p := range ps {
				w := want[p.Partition]
				if !slices.Equal(p.Replicas, w) || !slices.Equal(p.ISR, w) || p.Leader != w[0] {
					return fmt.Errorf("partition %d: leader %d, replicas %v, isr %v", p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
			return nil
		})
	}
}

// TestClusterElectLeaders: a preferred-replica election answers
// PREFERRED_LEADER_NOT_AVAILABLE while the first replica is down, and once
// it is back, success (or ELECTION_NOT_NEEDED if it already took over)
// with the first replica leading; an unclean election of a led partition
// is not needed, and with no topics named only partitions needing an
// election are listed.
func TestClusterElectLeaders(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Brokers: 3})
	seeds := c.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n1, n2 := testcluster.NodeID(0), testcluster.NodeID(1)
	const topic = "elect"
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	createAssigned(t, ctx, cl, seeds, topic, [][]int32{{n2, n1}, {n1, n2}})

	elect := func(cl *kgo.Client, typ int8, partitions ...int32) *kmsg.ElectLeadersResponse {
		t.Helper()
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType, req.TimeoutMillis = typ, 60_000
		if partitions != nil {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = topic, partitions
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("ElectLeaders: %v", err)
		}
		return resp
	}
	code := func(resp *kmsg.ElectLeadersResponse) error {
		t.Helper()
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ElectLeaders answered %+v, want one partition", resp.Topics)
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err := code(elect(cl, 0, 0)); err != kerr.ElectionNotNeeded {
		t.Fatalf("preferred election of a partition its first replica leads: %v, want ELECTION_NOT_NEEDED", err)
	}
	if resp := elect(cl, 0); len(resp.Topics) != 0 {
		t.Fatalf("preferred election of all partitions listed %+v, want none", resp.Topics)
	}

	c.KillBroker(1) // n2, partition 0's preferred leader
	live := []string{seeds[0], seeds[2]}
	cl1 := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(live...))
	// Once the killed broker's lease expires, partition 0 moves to its
	// second replica, and its preferred leader is not available.
	testbroker.Eventually(t, time.Minute, "preferred election with the first replica down", func() error {
		if err := code(elect(cl1, 0, 0)); err != kerr.PreferredLeaderNotAvailable {
			return fmt.Errorf("%v, want PREFERRED_LEADER_NOT_AVAILABLE", err)
		}
		return nil
	})
	testbroker.Eventually(t, time.Minute, "unclean election of a led partition", func() error {
		if err := code(elect(cl1, 1, 0)); err != kerr.ElectionNotNeeded {
			return fmt.Errorf("%v, want ELECTION_NOT_NEEDED", err)
		}
		return nil
	})
	all := elect(cl1, 0)
	if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 1 || all.Topics[0].Partitions[0].Partition != 0 ||
		all.Topics[0].Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election of all partitions: %+v, want partition 0 only, PREFERRED_LEADER_NOT_AVAILABLE", all.Topics)
	}

	c.RestartBroker(1)
	testbroker.Eventually(t, time.Minute, "the preferred election succeeds", func() error {
		err := code(elect(cl1, 0, 0))
		if err != nil && err != kerr.ElectionNotNeeded {
			return err
		}
		return nil
	})
	expectReplicas(t, ctx, seeds, topic, [][]int32{{n2, n1}, {n1, n2}})
}
