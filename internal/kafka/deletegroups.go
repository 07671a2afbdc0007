package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups v0-v2 (v2+ flexible). A group with members gets
// NON_EMPTY_GROUP; the answer waits until the tombstones are durable.
func init() { register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	var allowed []string
	for _, g := range req.Groups {
		if rc.authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, g) {
			allowed = append(allowed, g)
		}
	}
	wait := rc.groups().DeleteGroups(allowed)
	return func() kmsg.Response {
		errs := wait()
		for _, g := range req.Groups {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group = g
			if len(allowed) > 0 && allowed[0] == g {
				sg.ErrorCode = errorCode(errs[0])
				allowed, errs = allowed[1:], errs[1:]
			} else {
				sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
}
