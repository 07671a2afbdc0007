package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v0-v6. v3 adds authorized operations, v4 static instance
// ids, v5+ is flexible. An unknown group, and one run by the consumer
// protocol (KIP-848), is reported in state Dead: with no error before v6,
// and from v6 (KIP-1043) with GROUP_ID_NOT_FOUND and Kafka's messages.
func init() { register(kmsg.DescribeGroups, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	var allowed []string
	denied := map[string]bool{}
	for _, g := range req.Groups {
		if rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g) {
			allowed = append(allowed, g)
		} else {
			denied[g] = true
		}
	}
	described := rc.groups().Describe(allowed)
	for _, g := range req.Groups {
		if denied[g] {
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group = g
			sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			sg.AuthorizedOperations = notProvided
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		d := described[0]
		described = described[1:]
		sg := kmsg.NewDescribeGroupsResponseGroup()
		sg.Group = d.Group
		sg.ErrorCode = errorCode(d.Err)
		if rc.version() >= 6 && d.Err == nil && (d.Absent || d.NotClassic) {
			sg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + d.Group + " not found."
			if d.NotClassic {
				msg = "Group " + d.Group + " is not a classic group."
			}
			sg.ErrorMessage = &msg
		}
		sg.State = d.State
		sg.ProtocolType = d.ProtocolType
		sg.Protocol = d.Protocol
		sg.AuthorizedOperations = rc.authorizedOps(req.IncludeAuthorizedOperations, groupOperations, kmsg.ACLResourceTypeGroup, sg.Group)
		for _, m := range d.Members {
			sm := kmsg.NewDescribeGroupsResponseGroupMember()
			sm.MemberID = m.MemberID
			sm.InstanceID = m.InstanceID
			sm.ClientID = m.ClientID
			sm.ClientHost = m.ClientHost
			sm.ProtocolMetadata = nonNil(m.Metadata)
			sm.MemberAssignment = nonNil(m.Assignment)
			sg.Members = append(sg.Members, sm)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return done(resp)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
