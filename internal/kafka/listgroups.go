package kafka

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups v0-v5. v3+ is flexible, v4 filters by state (KIP-518), v5 by
// group type (KIP-848: "classic" or "consumer"). Filters compare
// case-insensitively, as Kafka's do.
func init() { register(kmsg.ListGroups, 0, 5, handleListGroups) }

func handleListGroups(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := rc.groups().List()
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return done(resp)
	}
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	// DESCRIBE on the cluster lists every group; otherwise those the
	// client may describe.
	all := rc.clusterAuthorized(kmsg.ACLOperationDescribe)
	for _, g := range groups {
		if !match(req.StatesFilter, g.State) || !match(req.TypesFilter, g.Type) {
			continue
		}
		if !all && !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			continue
		}
		sg := kmsg.NewListGroupsResponseGroup()
		sg.Group = g.Group
		sg.ProtocolType = g.ProtocolType
		sg.GroupState = g.State
		sg.GroupType = g.Type
		resp.Groups = append(resp.Groups, sg)
	}
	return done(resp)
}
