package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// ConsumerGroupHeartbeat v0-v1 (KIP-848). v1 (Kafka 4.0) has the client
// name its member id (KIP-1082) and adds SubscribedTopicRegex, matched
// against whole topic names with Go's regexp (RE2, the syntax of Kafka's
// RE2J); an invalid one is INVALID_REGULAR_EXPRESSION. On v0 the
// coordinator names a joining member. Server assignors: uniform (default)
// and range.
func init() { register(kmsg.ConsumerGroupHeartbeat, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return done(resp)
	}
	if lin := rc.lineage(); lin != nil && req.MemberEpoch >= 0 {
		lin.Joined(req.Group, rc.clientID())
	}
	r := group.ConsumerHeartbeat{
		Version:            rc.version(),
		Group:              req.Group,
		MemberID:           req.MemberID,
		MemberEpoch:        req.MemberEpoch,
		InstanceID:         req.InstanceID,
		RackID:             req.RackID,
		RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		SubscribedTopics:   req.SubscribedTopicNames,
		SubscribedRegex:    req.SubscribedTopicRegex,
		ServerAssignor:     req.ServerAssignor,
		ClientID:           rc.clientID(),
		ClientHost:         rc.clientHost(),
	}
	if req.Topics != nil {
		r.Owned = make([]group.IDPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			r.Owned = append(r.Owned, group.IDPartitions{ID: t.TopicID, Partitions: t.Partitions})
		}
	}
	ch := rc.groups().ConsumerHeartbeat(rc.ctx, r)
	return func() kmsg.Response {
		var res group.ConsumerHeartbeatResult
		select {
		case res = <-ch:
		case <-rc.ctx.Done():
			res.Err = group.ErrNotAvailable
		}
		if res.Err != nil {
			resp.ErrorCode = errorCode(res.Err)
			resp.ErrorMessage = errorMessage(res.Err)
			return resp
		}
		id := res.MemberID
		resp.MemberID = &id
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
		if res.HasAssignment {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			for _, t := range res.Assignment {
				at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				at.TopicID = t.ID
				at.Partitions = t.Partitions
				a.Topics = append(a.Topics, at)
			}
			if a.Topics == nil {
				a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
			}
			resp.Assignment = &a
		}
		return resp
	}
}
