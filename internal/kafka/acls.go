package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAcls, CreateAcls and DeleteAcls v1-v3 (v1 is the KIP-896 floor,
// v2+ flexible). sluice has no authorizer yet, and Kafka without an
// authorizer answers every ACL request with SECURITY_DISABLED; so does this.
func init() {
	register(kmsg.DescribeACLs, 1, 3, handleDescribeACLs)
	register(kmsg.CreateACLs, 1, 3, handleCreateACLs)
	register(kmsg.DeleteACLs, 1, 3, handleDeleteACLs)
}

var noAuthorizer = "no authorizer is configured on the broker"

func handleDescribeACLs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	resp := kreq.(*kmsg.DescribeACLsRequest).ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = kerr.SecurityDisabled.Code
	resp.ErrorMessage = &noAuthorizer
	return done(resp)
}

func handleCreateACLs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = &noAuthorizer
		resp.Results = append(resp.Results, r)
	}
	return done(resp)
}

func handleDeleteACLs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = kerr.SecurityDisabled.Code
		r.ErrorMessage = &noAuthorizer
		resp.Results = append(resp.Results, r)
	}
	return done(resp)
}
