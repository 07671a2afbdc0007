package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// OffsetDelete v0 (KIP-496): deletes committed offsets of topics the group
// does not consume (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
func init() { register(kmsg.OffsetDelete, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !rc.authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return done(resp)
	}
	b := rc.broker()
	type slot struct{ t, p, i, j int }
	var topics []group.TopicPartitions
	var slots []slot
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		var tps group.TopicPartitions
		tps.Topic = rt.Topic
		denied := !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if _, err := b.Partition(rt.Topic, rp.Partition); err != nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				slots = append(slots, slot{ti, pi, len(topics), len(tps.Partitions)})
				tps.Partitions = append(tps.Partitions, rp.Partition)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		topics = append(topics, tps)
		resp.Topics = append(resp.Topics, st)
	}
	top, wait := rc.groups().DeleteOffsets(req.Group, topics)
	if top != nil {
		resp.ErrorCode = errorCode(top)
		resp.Topics = nil
		return done(resp)
	}
	return func() kmsg.Response {
		errs := wait()
		for _, s := range slots {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = errorCode(errs[s.i][s.j])
		}
		return resp
	}
}
