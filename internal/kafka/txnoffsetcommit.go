package kafka

import (
	"errors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/txn"
)

// TxnOffsetCommit v0-v4. v2 adds leader epochs and allows PRODUCER_FENCED,
// v3 (KIP-447) the member id, generation and instance id, checked when
// sent, v3+ is flexible, v4 allows TRANSACTION_ABORTABLE. The producer is
// checked against the transaction coordinator (a fenced producer cannot
// commit); the offsets are written to __consumer_offsets as Kafka writes
// them and take effect when the transaction commits.
func init() { register(kmsg.TxnOffsetCommit, 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	b := rc.broker()
	v := rc.version()
	r := group.TxnCommitRequest{Group: req.Group, PID: req.ProducerID, Epoch: req.ProducerEpoch, Generation: -1}
	if v >= 3 {
		r.MemberID, r.InstanceID, r.Generation = req.MemberID, req.InstanceID, req.Generation
	}
	type slot struct{ t, p int }
	var slots []slot
	reqDenied := int16(0)
	switch {
	case !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		reqDenied = kerr.TransactionalIDAuthorizationFailed.Code
	case !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		reqDenied = kerr.GroupAuthorizationFailed.Code
	}
	for ti, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		topicDenied := !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if reqDenied != 0 {
				sp.ErrorCode = reqDenied
			} else if topicDenied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if _, err := b.Partition(rt.Topic, rp.Partition); err != nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				epoch := int32(-1)
				if v >= 2 {
					epoch = rp.LeaderEpoch
				}
				r.Partitions = append(r.Partitions, group.CommitPartition{Topic: rt.Topic, Partition: rp.Partition,
					Offset: rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata})
				slots = append(slots, slot{ti, pi})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(r.Partitions) == 0 {
		return done(resp)
	}
	return func() kmsg.Response {
		setAll := func(code int16) kmsg.Response {
			for _, s := range slots {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = code
			}
			return resp
		}
		// As Kafka's group coordinator, trust the producer when its
		// transaction coordinator is another broker (cluster mode).
		if err := rc.txns().CheckProducer(req.TransactionalID, req.ProducerID, req.ProducerEpoch); err != nil && !errors.Is(err, txn.ErrNotCoordinator) {
			return setAll(fencedCode(err, v >= 2))
		}
		var errs []error
		select {
		case errs = <-rc.groups().TxnCommit(rc.ctx, r):
		case <-rc.ctx.Done():
			return setAll(kerr.CoordinatorNotAvailable.Code)
		}
		for i, s := range slots {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = errorCode(errs[i])
		}
		return resp
	}
}
