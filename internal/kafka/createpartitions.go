package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// CreatePartitions v0-v3 (v2+ flexible).
func init() { register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = &msg
		}
		info, ok := b.Engine().Topic(rt.Topic)
		internal := broker.RefuseInternal("add partitions to", rt.Topic)
		switch {
		case !rc.authorized(kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic, rt.Topic):
			fail(kerr.TopicAuthorizationFailed.Code, "not authorized to alter topic "+rt.Topic)
		case seen[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic %q appears more than once in the request", rt.Topic))
		case internal != nil:
			// Whether it exists yet or not: its partition count is the
			// broker's to choose.
			fail(errorCode(internal), internal.Error())
		case !ok:
			fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", rt.Topic))
		case rt.Count <= info.Partitions:
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q has %d partitions; the new count %d must be larger", rt.Topic, info.Partitions, rt.Count))
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count-info.Partitions):
			fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("%d assignments given for %d new partitions", len(rt.Assignment), rt.Count-info.Partitions))
		case rt.Count > 100000:
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("%d partitions exceeds the per-topic limit of 100000", rt.Count))
		default:
			var as [][]int32
			for _, a := range rt.Assignment {
				as = append(as, a.Replicas)
			}
			if err := b.CreatePartitions(rc.ctx, rt.Topic, rt.Count, as, req.ValidateOnly); err != nil {
				fail(errorCode(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}
