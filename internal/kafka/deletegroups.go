package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups v0-v2 (v2+ flexible). A group with members gets
// NON_EMPTY_GROUP; the answer waits until the tombstones are durable.
func init() { register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	wait := rc.groups().DeleteGroups(req.Groups)
	return func() kmsg.Response {
		for i, err := range wait() {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group = req.Groups[i]
			sg.ErrorCode = errorCode(err)
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
}
