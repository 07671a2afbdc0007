package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials v0 (flexible, KIP-554): the mechanisms and
// iteration counts of users' SCRAM credentials, never their keys. No users
// named (null or empty) describes every user with credentials.
func init() { register(kmsg.DescribeUserSCRAMCredentials, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
	users := make([]string, 0, len(req.Users))
	for _, u := range req.Users {
		users = append(users, u.Name)
	}
	creds, errs, err := rc.conn.srv.cfg.Credentials.Describe(rc.ctx, users)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return done(resp)
	}
	names := make([]string, 0, len(creds)+len(errs))
	for u := range creds {
		names = append(names, u)
	}
	for u := range errs {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		if err := errs[u]; err != nil {
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		for _, c := range creds[u] {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = c.Mechanism, c.Iterations
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		resp.Results = append(resp.Results, r)
	}
	return done(resp)
}
