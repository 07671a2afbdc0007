package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/txn"
)

// ListTransactions v0-v1 (KIP-664; v1 adds KIP-994's duration filter).
// Unknown state names in the filter are listed in unknown_state_filters
// and match nothing, as Kafka.
func init() { register(kmsg.ListTransactions, 0, 1, handleListTransactions) }

func handleListTransactions(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var f txn.ListFilter
	for _, s := range req.StateFilters {
		st, ok := txn.ParseState(s)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			continue
		}
		f.States = append(f.States, st)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return done(resp)
	}
	f.PIDs = req.ProducerIDFilters
	if rc.version() >= 1 && req.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	list, err := rc.txns().List(f)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return done(resp)
	}
	for _, d := range list {
		if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, d.ID) {
			continue // only the transactions the client may describe
		}
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = d.ID, d.PID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return done(resp)
}
