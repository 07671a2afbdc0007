package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/quota"
)

// AlterClientQuotas v0-v1 (KIP-546; v1 flexible): sets or removes client
// quotas, each entity's changes atomically. sluice enforces
// producer_byte_rate and consumer_byte_rate; other keys are refused with
// INVALID_REQUEST rather than stored and ignored.
func init() { register(kmsg.AlterClientQuotas, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	qs := rc.conn.srv.cfg.Quotas
	denied := !rc.clusterAuthorized(kmsg.ACLOperationAlterConfigs)
	for _, en := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		var entity quota.Entity
		for _, c := range en.Entity {
			ec := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ec.Type, ec.Name = c.Type, c.Name
			re.Entity = append(re.Entity, ec)
			entity = append(entity, quota.Component{Type: c.Type, Name: c.Name})
		}
		if denied {
			re.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Entries = append(resp.Entries, re)
			continue
		}
		ops := make([]quota.Op, 0, len(en.Ops))
		for _, op := range en.Ops {
			ops = append(ops, quota.Op{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		if qs == nil {
			re.ErrorCode = errorCode(quota.ErrInvalid)
		} else if err := qs.Alter(rc.ctx, entity, ops, req.ValidateOnly); err != nil {
			re.ErrorCode = errorCode(err)
			re.ErrorMessage = errorMessage(err)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return done(resp)
}
