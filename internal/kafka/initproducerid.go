package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId v0-v5. With a transactional id the transaction
// coordinator answers (internal/txn): a new producer id on first use, an
// epoch bump on every init that fences the previous incarnation and aborts
// its ongoing transaction, KIP-360 recovery when the client passes its
// current producer id and epoch (v3+), CONCURRENT_TRANSACTIONS while a
// previous commit or abort completes. A fenced v3+ caller gets
// PRODUCER_FENCED from v4 on, INVALID_PRODUCER_EPOCH before.
//
// Without a transactional id Kafka's TransactionCoordinator "always blindly
// accepts the request and returns a new producerId" at epoch 0, whatever
// producer id and epoch (v3+, KIP-360) the client passes: an idempotent
// producer bumps its epoch locally (KIP-360) and asks the broker only when
// the epoch would overflow, and only a transactional id ties two producer
// instances together, so there is nothing to fence. sluice does the same.
// As Kafka's KafkaApis, a v3+ request passing only one of producer id and
// epoch is INVALID_REQUEST. v4 allows PRODUCER_FENCED and v5 (KIP-890)
// TRANSACTION_ABORTABLE, neither of which a non-transactional init returns.
func init() { register(kmsg.InitProducerID, 0, 5, handleInitProducerID) }

func handleInitProducerID(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID = -1
	resp.ProducerEpoch = -1
	if req.Version >= 3 && (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return done(resp)
	}
	// A transactional producer needs WRITE on its transactional id; an
	// idempotent one IDEMPOTENT_WRITE on the cluster (Kafka also accepts
	// WRITE on any topic, which a per-resource check cannot see).
	if req.TransactionalID != nil && !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return done(resp)
	}
	if req.TransactionalID == nil && !rc.clusterAuthorized(kmsg.ACLOperationIdempotentWrite) && !rc.mayWriteAnyTopic() {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
	if req.TransactionalID != nil {
		expectPID, expectEpoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			expectPID, expectEpoch = req.ProducerID, req.ProducerEpoch
		}
		id, timeout := *req.TransactionalID, time.Duration(req.TransactionTimeoutMillis)*time.Millisecond
		return func() kmsg.Response {
			r, err := rc.txns().InitProducerID(rc.ctx, id, timeout, expectPID, expectEpoch)
			if err != nil {
				resp.ErrorCode = fencedCode(err, req.Version >= 4)
				return resp
			}
			resp.ProducerID, resp.ProducerEpoch = r.PID, r.Epoch
			if lin := rc.lineage(); lin != nil {
				lin.ProducerID(r.PID, r.Epoch, rc.clientID(), rc.conn.principal(), id)
			}
			return resp
		}
	}
	id, err := rc.broker().Engine().NextProducerID(rc.ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return done(resp)
	}
	resp.ProducerID = id
	resp.ProducerEpoch = 0
	if lin := rc.lineage(); lin != nil {
		lin.ProducerID(id, 0, rc.clientID(), rc.conn.principal(), "")
	}
	return done(resp)
}
