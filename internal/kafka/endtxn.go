package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn v0-v4. v2 allows PRODUCER_FENCED, v3+ is flexible, v4 allows
// TRANSACTION_ABORTABLE. v5 (KIP-890 transaction version 2, an epoch bump
// per transaction) is not served: clients then use the v4 protocol.
//
// The answer comes once PrepareCommit/PrepareAbort is durable and the
// markers are written (see internal/txn); a retry of a finished EndTxn
// succeeds again.
func init() { register(kmsg.EndTxn, 0, 4, handleEndTxn) }

func handleEndTxn(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return done(resp)
	}
	return func() kmsg.Response {
		err := rc.txns().EndTxn(rc.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		resp.ErrorCode = fencedCode(err, rc.version() >= 2)
		return resp
	}
}
