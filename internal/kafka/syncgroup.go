package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// SyncGroup v0-v5. v3 adds the static instance id, v4+ is flexible, v5
// checks the protocol type and name against the group's (KIP-559).
func init() { register(kmsg.SyncGroup, 0, 5, handleSyncGroup) }

func handleSyncGroup(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return done(resp)
	}
	r := group.SyncRequest{
		Group:        req.Group,
		MemberID:     req.MemberID,
		InstanceID:   req.InstanceID,
		Generation:   req.Generation,
		ProtocolType: req.ProtocolType,
		Protocol:     req.Protocol,
		Assignments:  make(map[string][]byte, len(req.GroupAssignment)),
	}
	for _, a := range req.GroupAssignment {
		r.Assignments[a.MemberID] = a.MemberAssignment
	}
	ch := rc.groups().Sync(r)
	return func() kmsg.Response {
		var res group.SyncResult
		select {
		case res = <-ch:
		case <-rc.ctx.Done():
			res.Err = group.ErrNotAvailable
		}
		resp.ErrorCode = errorCode(res.Err)
		resp.MemberAssignment = []byte{}
		if res.Err != nil {
			return resp
		}
		pt, p := res.ProtocolType, res.Protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
		if res.Assignment != nil {
			resp.MemberAssignment = res.Assignment
		}
		return resp
	}
}
