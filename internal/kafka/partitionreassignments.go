package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments v0 and ListPartitionReassignments v0 (both
// flexible). Data lives in the storage layer, not on brokers, so a
// reassignment moves no data and is complete when it is answered: the
// partition reports the new replica list, and its leadership moves to the
// first live broker of it (the preferred leader). A list naming an unknown
// broker, or one twice, is INVALID_REPLICA_ASSIGNMENT; cancelling (a null
// list) answers NO_REASSIGNMENT_IN_PROGRESS, and ListPartitionReassignments
// lists nothing, as Kafka does once reassignments have finished.
func init() {
	register(kmsg.AlterPartitionAssignments, 0, 0, handleAlterPartitionReassignments)
	register(kmsg.ListPartitionReassignments, 0, 0, handleListPartitionReassignments)
}

func handleAlterPartitionReassignments(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
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
			default:
				err = b.Reassign(rc.ctx, rt.Topic, map[int32][]int32{rp.Partition: rp.Replicas})
				if err != nil {
					sp.ErrorCode = errorCode(err)
					sp.ErrorMessage = errorMessage(err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}

func handleListPartitionReassignments(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	return done(resp)
}
