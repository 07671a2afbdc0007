package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// LeaveGroup v0-v5. v3+ batches members and names static ones by instance
// id (KIP-345), v4+ is flexible, v5 carries a reason.
func init() { register(kmsg.LeaveGroup, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return done(resp)
	}
	var members []group.LeaveMember
	if rc.version() < 3 {
		members = []group.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
	}
	top, errs := rc.groups().Leave(req.Group, members)
	if top != nil {
		resp.ErrorCode = errorCode(top)
		return done(resp)
	}
	if rc.version() < 3 {
		resp.ErrorCode = errorCode(errs[0])
		return done(resp)
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = m.MemberID
		rm.InstanceID = m.InstanceID
		rm.ErrorCode = errorCode(errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return done(resp)
}
