package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions v0 (KIP-664): state, producer id and epoch,
// timeout, start time (-1 when no transaction runs) and partitions.
// Unknown ids: TRANSACTIONAL_ID_NOT_FOUND.
func init() { register(kmsg.DescribeTransactions, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		d, err := rc.txns().Describe(id)
		if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id) {
			err = kerr.TransactionalIDAuthorizationFailed
		}
		if err != nil {
			st.ErrorCode = errorCode(err)
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = d.State.String()
		st.ProducerID, st.ProducerEpoch = d.PID, d.Epoch
		st.TimeoutMillis = int32(d.Timeout.Milliseconds())
		if !d.Started.IsZero() {
			st.StartTimestamp = d.Started.UnixMilli()
		}
		for _, p := range d.Partitions {
			if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = p.Topic
				st.Topics = append(st.Topics, t)
			}
			t := &st.Topics[len(st.Topics)-1]
			t.Partitions = append(t.Partitions, p.Partition)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return done(resp)
}
