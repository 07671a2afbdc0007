package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId v0-v4 for idempotent (non-transactional) producers: each
// call gets a fresh durable producer id at epoch 0. Transactional ids arrive
// with the transaction coordinator.
func init() { register(kmsg.InitProducerID, 0, 4, handleInitProducerID) }

func handleInitProducerID(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID = -1
	resp.ProducerEpoch = -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return done(resp)
	}
	id, err := rc.broker().Engine().NextProducerID(rc.ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return done(resp)
	}
	resp.ProducerID = id
	resp.ProducerEpoch = 0
	return done(resp)
}
