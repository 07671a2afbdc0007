package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/quota"
)

// DescribeClientQuotas v0-v1 (KIP-546; v1 flexible): the stored client
// quotas of the entities matching a filter.
func init() { register(kmsg.DescribeClientQuotas, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
	filters := make([]quota.Filter, 0, len(req.Components))
	for _, c := range req.Components {
		f := quota.Filter{Type: c.EntityType, Match: quota.Match(c.MatchType)}
		if c.Match != nil {
			f.Name = *c.Match
		}
		filters = append(filters, f)
	}
	qs := rc.conn.srv.cfg.Quotas
	if qs == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return done(resp)
	}
	found, err := qs.Describe(filters, req.Strict)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = errorMessage(err)
		return done(resp)
	}
	for _, d := range found {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range d.Entity {
			ec := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ec.Type = c.Type
			ec.Name = c.Name
			e.Entity = append(e.Entity, ec)
		}
		for k, v := range d.Values {
			ev := kmsg.NewDescribeClientQuotasResponseEntryValue()
			ev.Key, ev.Value = k, v
			e.Values = append(e.Values, ev)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return done(resp)
}
