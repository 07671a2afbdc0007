package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments v0 and ListPartitionReassignments v0 (both
// flexible). Data lives in the storage layer, not on brokers, so there is
// never a reassignment in progress; assigning a partition to the node that
// already leads it is accepted as a no-op, any other replica set names a
// broker that does not exist (INVALID_REPLICA_ASSIGNMENT), and cancelling
// answers NO_REASSIGNMENT_IN_PROGRESS, as Kafka does.
func init() {
	register(kmsg.AlterPartitionAssignments, 0, 0, handleAlterPartitionReassignments)
	register(kmsg.ListPartitionReassignments, 0, 0, handleListPartitionReassignments)
}

func handleAlterPartitionReassignments(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			_, err := b.Partition(rt.Topic, rp.Partition)
			switch {
			case err != nil:
				sp.ErrorCode = errorCode(err)
			case rp.Replicas == nil:
				sp.ErrorCode = kerr.NoReassignmentInProgress.Code
			case len(rp.Replicas) != 1 || rp.Replicas[0] != b.NodeID():
				sp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				msg := fmt.Sprintf("replicas %v: the only broker is %d", rp.Replicas, b.NodeID())
				sp.ErrorMessage = &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}

func handleListPartitionReassignments(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	return done(req.ResponseKind())
}
