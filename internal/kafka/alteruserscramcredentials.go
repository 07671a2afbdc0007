package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/scram"
)

// AlterUserScramCredentials v0 (flexible, KIP-554): deletes and upserts
// SCRAM credentials. The client sends the salted password, never the
// password; the broker keeps only the keys derived from it. One result per
// user named; a user's alterations succeed or fail together.
func init() { register(kmsg.AlterUserSCRAMCredentials, 0, 0, handleAlterUserScramCredentials) }

func namesOfDeletions(ds []kmsg.AlterUserSCRAMCredentialsRequestDeletion) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return out
}

func namesOfUpsertions(us []kmsg.AlterUserSCRAMCredentialsRequestUpsertion) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Name
	}
	return out
}

func handleAlterUserScramCredentials(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationAlter) {
		seen := map[string]bool{}
		for _, u := range append(append([]string(nil), namesOfDeletions(req.Deletions)...), namesOfUpsertions(req.Upsertions)...) {
			if !seen[u] {
				seen[u] = true
				r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				r.User, r.ErrorCode = u, kerr.ClusterAuthorizationFailed.Code
				resp.Results = append(resp.Results, r)
			}
		}
		return done(resp)
	}
	dels := make([]scram.Deletion, 0, len(req.Deletions))
	for _, d := range req.Deletions {
		dels = append(dels, scram.Deletion{User: d.Name, Mechanism: d.Mechanism})
	}
	ups := make([]scram.Upsertion, 0, len(req.Upsertions))
	for _, u := range req.Upsertions {
		ups = append(ups, scram.Upsertion{User: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations,
			Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	results := rc.conn.srv.cfg.Credentials.Alter(rc.ctx, dels, ups)
	// In the order the users first appear, deletions first, as Kafka answers.
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		if err := results[user]; err != nil {
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	for _, d := range dels {
		add(d.User)
	}
	for _, u := range ups {
		add(u.User)
	}
	return done(resp)
}
