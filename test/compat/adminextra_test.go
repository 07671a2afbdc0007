package compat

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestAdminExtras covers the admin APIs whose answers follow from sluice's
// design (one log directory, no replicas to move or elect, no authorizer):
// DescribeLogDirs, ElectLeaders, partition reassignments and ACLs.
func TestAdminExtras(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	produceKgo(t, b.Addr(), topic, sampleRecords(50, sampleOpts{}))
	br := seed(t, b.Addr())

	t.Run("AuthorizedOperations", func(t *testing.T) {
		// With no authorizer Kafka reports every operation a resource
		// supports when asked (KIP-430), and INT32_MIN when not.
		const (
			notProvided = -2147483648
			topicOps    = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11 // 8 operations
			clusterOps  = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12       // 7 operations
		)
		for _, ask := range []bool{false, true} {
			req := kmsg.NewPtrMetadataRequest() // v11+: the cluster's only through DescribeCluster
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			req.IncludeTopicAuthorizedOperations, req.IncludeClusterAuthorizedOperations = ask, ask
			resp := request[*kmsg.MetadataResponse](t, br, req)
			wantT, wantC := int32(notProvided), int32(notProvided)
			if ask {
				wantT, wantC = topicOps, clusterOps
			}
			if got := resp.Topics[0].AuthorizedOperations; got != wantT {
				t.Errorf("metadata (asked %t): topic operations %#x, want %#x", ask, got, wantT)
			}
			dreq := kmsg.NewPtrDescribeClusterRequest()
			dreq.IncludeClusterAuthorizedOperations = ask
			dresp := request[*kmsg.DescribeClusterResponse](t, br, dreq)
			if dresp.ClusterAuthorizedOperations != wantC {
				t.Errorf("DescribeCluster (asked %t): operations %#x, want %#x", ask, dresp.ClusterAuthorizedOperations, wantC)
			}
		}
	})

	t.Run("DescribeLogDirs", func(t *testing.T) {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		resp := request[*kmsg.DescribeLogDirsResponse](t, br, req)
		if len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 || resp.Dirs[0].Dir == "" {
			t.Fatalf("want one healthy log dir, got %+v", resp.Dirs)
		}
		var size int64
		for _, dt := range resp.Dirs[0].Topics {
			if dt.Topic == topic {
				for _, p := range dt.Partitions {
					size += p.Size
				}
			}
		}
		if size <= 0 {
			t.Fatalf("topic %s reported %d bytes after 50 records", topic, size)
		}
		if resp.Dirs[0].TotalBytes <= 0 || resp.Dirs[0].UsableBytes <= 0 {
			t.Fatalf("total/usable bytes %d/%d", resp.Dirs[0].TotalBytes, resp.Dirs[0].UsableBytes)
		}
	})

	t.Run("ElectLeaders", func(t *testing.T) {
		req := kmsg.NewPtrElectLeadersRequest()
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = topic
		rt.Partitions = []int32{0, 5}
		req.Topics = append(req.Topics, rt)
		resp := request[*kmsg.ElectLeadersResponse](t, br, req)
		ps := resp.Topics[0].Partitions
		wantCode(t, "elect partition 0", ps[0].ErrorCode, kerr.ElectionNotNeeded)
		wantCode(t, "elect partition 5 of 2", ps[1].ErrorCode, kerr.UnknownTopicOrPartition)

		req.ElectionType = 1 // unclean: the partition has a leader
		resp = request[*kmsg.ElectLeadersResponse](t, br, req)
		wantCode(t, "unclean election of partition 0", resp.Topics[0].Partitions[0].ErrorCode, kerr.ElectionNotNeeded)

		all := kmsg.NewPtrElectLeadersRequest() // null topics: every partition
		if resp := request[*kmsg.ElectLeadersResponse](t, br, all); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
			t.Fatalf("election of every partition: code %d, topics %+v; want none needing one", resp.ErrorCode, resp.Topics)
		}
	})

	t.Run("PartitionReassignments", func(t *testing.T) {
		list := request[*kmsg.ListPartitionReassignmentsResponse](t, br, kmsg.NewPtrListPartitionReassignmentsRequest())
		if list.ErrorCode != 0 || len(list.Topics) != 0 {
			t.Fatalf("list reassignments: code %d, %d topics", list.ErrorCode, len(list.Topics))
		}
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		for _, replicas := range [][]int32{{1}, {3}, nil} { // the broker is node 1
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Replicas = replicas
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := request[*kmsg.AlterPartitionAssignmentsResponse](t, br, req)
		ps := resp.Topics[0].Partitions
		wantCode(t, "reassign to the current broker", ps[0].ErrorCode, nil)
		wantCode(t, "reassign to a missing broker", ps[1].ErrorCode, kerr.InvalidReplicaAssignment)
		wantCode(t, "cancel a reassignment", ps[2].ErrorCode, kerr.NoReassignmentInProgress)
	})

	t.Run("CreatePartitionsAssigned", func(t *testing.T) {
		grow := func(count int32, replicas ...[]int32) int16 {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = topic, count
			for _, rs := range replicas {
				a := kmsg.NewCreatePartitionsRequestTopicAssignment()
				a.Replicas = rs
				rt.Assignment = append(rt.Assignment, a)
			}
			req.Topics = append(req.Topics, rt)
			return request[*kmsg.CreatePartitionsResponse](t, br, req).Topics[0].ErrorCode
		}
		wantCode(t, "new partition on a missing broker", grow(3, []int32{3}), kerr.InvalidReplicaAssignment)
		wantCode(t, "new partition with an empty replica list", grow(3, []int32{}), kerr.InvalidReplicaAssignment)
		wantCode(t, "new partition on the broker", grow(3, []int32{1}), nil)
		mresp := request[*kmsg.MetadataResponse](t, br, &kmsg.MetadataRequest{Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}})
		if ps := mresp.Topics[0].Partitions; len(ps) != 3 || len(ps[2].Replicas) != 1 || ps[2].Replicas[0] != 1 {
			t.Fatalf("after growing to 3 with partition 2 on broker 1: %+v", ps)
		}
	})

	t.Run("ACLs", func(t *testing.T) {
		resp := request[*kmsg.DescribeACLsResponse](t, br, kmsg.NewPtrDescribeACLsRequest())
		wantCode(t, "describe ACLs", resp.ErrorCode, kerr.SecurityDisabled)
		creq := kmsg.NewPtrCreateACLsRequest()
		creq.Creations = append(creq.Creations, kmsg.NewCreateACLsRequestCreation())
		cresp := request[*kmsg.CreateACLsResponse](t, br, creq)
		wantCode(t, "create ACL", cresp.Results[0].ErrorCode, kerr.SecurityDisabled)
	})
}
