package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/txn"
)

// AddPartitionsToTxn v0-v5. v2 allows PRODUCER_FENCED (older versions get
// INVALID_PRODUCER_EPOCH), v3+ is flexible, v4+ (KIP-890) is the batched
// form brokers send, several transactions per request with verify_only;
// v5 allows TRANSACTION_ABORTABLE. Clients send the single-transaction
// form (v0-v3); a v4+ request is served per transaction, adding the
// partitions or, with verify_only, checking they are in the ongoing
// transaction (INVALID_TXN_STATE when not).
//
// As Kafka: an unknown partition fails with UNKNOWN_TOPIC_OR_PARTITION and
// the other partitions of the request with OPERATION_NOT_ATTEMPTED.
func init() { register(kmsg.AddPartitionsToTxn, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	v := rc.version()
	if v < 4 {
		return func() kmsg.Response {
			resp.Topics = addPartitions(rc, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, req.Topics, v >= 2)
			return resp
		}
	}
	return func() kmsg.Response {
		for _, t := range req.Transactions {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = t.TransactionalID
			topics := make([]kmsg.AddPartitionsToTxnRequestTopic, 0, len(t.Topics))
			for _, tt := range t.Topics {
				topics = append(topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: tt.Topic, Partitions: tt.Partitions})
			}
			for _, st := range addPartitions(rc, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly, topics, true) {
				ot := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				ot.Topic = st.Topic
				for _, sp := range st.Partitions {
					op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					op.Partition, op.ErrorCode = sp.Partition, sp.ErrorCode
					ot.Partitions = append(ot.Partitions, op)
				}
				rt.Topics = append(rt.Topics, ot)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp
	}
}

// addPartitions serves one transaction's partitions, one code for each.
func addPartitions(rc *reqCtx, id string, pid int64, epoch int16, verify bool, topics []kmsg.AddPartitionsToTxnRequestTopic, hasFenced bool) []kmsg.AddPartitionsToTxnResponseTopic {
	b := rc.broker()
	var parts []txn.TopicPartition
	unknown := false
	for _, t := range topics {
		for _, p := range t.Partitions {
			if _, err := b.Partition(t.Topic, p); err != nil && !log.IsInternalTopic(t.Topic) {
				unknown = true
			}
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	codeFor := func(tp txn.TopicPartition) int16 { return 0 }
	deniedTopic := false
	for _, t := range topics {
		if !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, t.Topic) {
			deniedTopic = true
		}
	}
	switch {
	case !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id):
		codeFor = func(txn.TopicPartition) int16 { return kerr.TransactionalIDAuthorizationFailed.Code }
	case deniedTopic:
		// As Kafka: the denied topics fail, the rest are not attempted.
		codeFor = func(tp txn.TopicPartition) int16 {
			if !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, tp.Topic) {
				return kerr.TopicAuthorizationFailed.Code
			}
			return kerr.OperationNotAttempted.Code
		}
	case unknown:
		codeFor = func(tp txn.TopicPartition) int16 {
			if _, err := b.Partition(tp.Topic, tp.Partition); err != nil {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		}
	case verify:
		codeFor = func(tp txn.TopicPartition) int16 {
			return fencedCode(rc.txns().Verify(id, pid, epoch, tp), hasFenced)
		}
	default:
		code := fencedCode(rc.txns().AddPartitions(rc.ctx, id, pid, epoch, parts), hasFenced)
		codeFor = func(txn.TopicPartition) int16 { return code }
	}
	out := make([]kmsg.AddPartitionsToTxnResponseTopic, 0, len(topics))
	for _, t := range topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition = p
			sp.ErrorCode = codeFor(txn.TopicPartition{Topic: t.Topic, Partition: p})
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}
