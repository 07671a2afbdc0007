package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn v0-v4: adds the group's __consumer_offsets partition to
// the transaction, so EndTxn writes a marker there and settles the
// offsets TxnOffsetCommit wrote. v2 allows PRODUCER_FENCED, v3+ is
// flexible, v4 allows TRANSACTION_ABORTABLE.
func init() { register(kmsg.AddOffsetsToTxn, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return done(resp)
	}
	if !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return done(resp)
	}
	if lin := rc.lineage(); lin != nil {
		lin.TxnReads(req.TransactionalID, req.Group)
	}
	return func() kmsg.Response {
		err := rc.txns().AddOffsets(rc.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		resp.ErrorCode = fencedCode(err, rc.version() >= 2)
		return resp
	}
}
