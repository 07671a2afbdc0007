package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// ConsumerGroupDescribe v0-v1 (KIP-848). v1 adds the member type (1:
// consumer protocol; classic members in consumer groups are not
// supported). Classic and unknown groups are GROUP_ID_NOT_FOUND, as in
// Kafka.
func init() { register(kmsg.ConsumerGroupDescribe, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	conv := func(ts []group.TopicAssignment) kmsg.Assignment {
		var a kmsg.Assignment
		a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
		for _, t := range ts {
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = t.ID, t.Topic, t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		return a
	}
	for _, d := range rc.groups().DescribeConsumerGroups(req.Groups) {
		sg := kmsg.NewConsumerGroupDescribeResponseGroup()
		sg.Group = d.Group
		if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, d.Group) {
			d = group.ConsumerGroupDescription{Group: d.Group, Err: kerr.GroupAuthorizationFailed}
		}
		sg.ErrorCode = errorCode(d.Err)
		sg.ErrorMessage = errorMessage(d.Err)
		sg.AuthorizedOperations = rc.authorizedOps(req.IncludeAuthorizedOperations, groupOperations, kmsg.ACLResourceTypeGroup, sg.Group)
		if d.Err == nil {
			sg.State = d.State
			sg.Epoch = d.Epoch
			sg.AssignmentEpoch = d.AssignmentEpoch
			sg.AssignorName = d.Assignor
			for _, m := range d.Members {
				sm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				sm.MemberID, sm.InstanceID, sm.RackID = m.MemberID, m.InstanceID, m.RackID
				sm.MemberEpoch = m.MemberEpoch
				sm.ClientID, sm.ClientHost = m.ClientID, m.ClientHost
				sm.SubscribedTopics, sm.SubscribedTopicRegex = m.SubscribedTopics, m.SubscribedRegex
				sm.Assignment, sm.TargetAssignment = conv(m.Assignment), conv(m.Target)
				sm.MemberType = 1
				sg.Members = append(sg.Members, sm)
			}
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return done(resp)
}
