package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/quota"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Produce v0-v10. v9+ is flexible; v10 adds the KIP-951 leader hints,
// which a single leader never needs to send. v11+ (KIP-890 implicit
// transaction membership) is not served. With a transactional id, each
// partition must be in the producer's ongoing transaction
// (INVALID_TXN_STATE otherwise; a stale epoch is INVALID_PRODUCER_EPOCH).
//
// v0-v2 are Kafka 3.9's old producers (Kafka 4 dropped them, KIP-896;
// librdkafka before 2.10 also only enables gzip, snappy and lz4 when the
// broker lists Produce v0). Their message sets of magic 0 or 1 are
// up-converted to one record batch (log.Partition.UpConvert), as Kafka 3.9
// converted them, and then validated and appended like any batch; a
// malformed set is CORRUPT_MESSAGE. Transactional requests (v3+, which
// no legacy client sends) are not up-converted: a message set there is
// refused.
func init() { register(kmsg.Produce, 0, 10, handleProduce) }

type produceWork struct {
	topic, part int // indexes into the response
	p           *log.Partition
	records     []byte
	forward     bool // held records forwarded to the delay store
	res         log.AppendResult
	err         error
	last        int64 // offset of the last record appended
	// held waits for the delay store's append of the records taken out
	// of the batch (Delayer.Hold): written, or durable; nil: none.
	held func(ctx context.Context, durable bool) error
}

// Delayer holds back records that carry a delayed-delivery header
// (internal/delay.Service): given a payload the log refused with
// log.ErrDelayed, it appends what is due now to p and keeps the rest.
type Delayer interface {
	Hold(ctx context.Context, p *log.Partition, payload []byte) (log.AppendResult, func(ctx context.Context, durable bool) error, error)
	// HoldTxn is Hold for a produce carrying transactional id txnID: held
	// records of a transactional batch wait for the transaction's outcome.
	HoldTxn(ctx context.Context, p *log.Partition, payload []byte, txnID string) (log.AppendResult, func(ctx context.Context, durable bool) error, error)
	// HoldForwarded appends to a partition of the delay store entries
	// that another broker took out of a batch (cluster mode).
	HoldForwarded(ctx context.Context, p *log.Partition, payload []byte) (log.AppendResult, func(ctx context.Context, durable bool) error, error)
	// IsForward reports whether a produce to the internal topic is a
	// broker forwarding held records (by client id; the principal must
	// also have ClusterAction, as for WriteTxnMarkers).
	IsForward(topic, clientID string) bool
}

// forwardedHold reports whether a produce to internal topic is another
// broker's forward of held records to the delay store.
func forwardedHold(rc *reqCtx, topic string) bool {
	d := rc.conn.srv.cfg.Delays
	return d != nil && d.IsForward(topic, rc.clientID()) && rc.clusterAuthorized(kmsg.ACLOperationClusterAction)
}

func handleProduce(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	start := time.Now()
	complete := produce(rc, kreq)
	if complete == nil {
		rc.produceDone(kreq, nil, start)
		return nil // acks=0
	}
	return func() kmsg.Response {
		r := complete()
		rc.produceDone(kreq, r, start)
		if pr, ok := r.(*kmsg.ProduceResponse); ok {
			addProduceLeaderHints(rc, pr)
		}
		return r
	}
}

// produce is handleProduce without the leader hints.
func produce(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	// Sized up front: a request spread over thousands of partitions
	// otherwise regrows these slices of large structs a dozen times.
	work := make([]*produceWork, 0, n)
	works := make([]produceWork, 0, n)
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	txnDenied := req.TransactionID != nil && !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID)
	lin := rc.lineage()
	for ti, rt := range req.Topics {
		topicDenied := !rc.authorized(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, rt.Topic)
		if lin != nil && !topicDenied && !txnDenied {
			lin.Produced(rc.clientID(), rc.conn.principal(), rt.Topic)
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			p, err := b.Partition(rt.Topic, rp.Partition)
			switch {
			case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case txnDenied:
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			case topicDenied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case log.IsInternalTopic(rt.Topic) && err == nil && len(rp.Records) > 0 && req.TransactionID == nil && forwardedHold(rc, rt.Topic):
				if !p.Led() {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
					break
				}
				works = append(works, produceWork{topic: ti, part: len(st.Partitions), p: p, records: rp.Records, forward: true})
				work = append(work, &works[len(works)-1])
			case log.IsInternalTopic(rt.Topic):
				// As Kafka's ReplicaManager: clients never write internal
				// topics (the group coordinator appends to the log itself).
				sp.ErrorCode = kerr.InvalidTopicException.Code
				sp.ErrorMessage = internalTopicMessage(rt.Topic)
			case err != nil:
				sp.ErrorCode = errorCode(err)
			case !p.Led():
				// Leadership is checked before the records, as Kafka does.
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case len(rp.Records) == 0:
				sp.ErrorCode = kerr.CorruptMessage.Code
			case req.TransactionID != nil && len(rp.Records) < 61:
				sp.ErrorCode = kerr.CorruptMessage.Code
			case req.TransactionID != nil:
				// Kafka's partition verification (KIP-890 part 1): a
				// transactional batch is taken only into a partition the
				// producer added to its ongoing transaction. The batch
				// itself goes to the log unchanged; its attributes carry
				// the transactional bit.
				// In a cluster the transaction's coordinator may live on
				// another broker; then the batch is taken unverified, as
				// before KIP-890 (ErrNotCoordinator).
				if err := rc.txns().Verify(*req.TransactionID, batch.ProducerID(rp.Records), batch.ProducerEpoch(rp.Records),
					txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}); err != nil && !errors.Is(err, txn.ErrNotCoordinator) {
					sp.ErrorCode = errorCode(err)
					sp.ErrorMessage = errorMessage(err)
					break
				}
				if err := rc.checkSchemas(rt.Topic, p, rp.Records); err != nil {
					sp.ErrorCode, sp.ErrorMessage = kerr.InvalidRecord.Code, errorMessage(err)
					break
				}
				works = append(works, produceWork{topic: ti, part: len(st.Partitions), p: p, records: rp.Records})
				work = append(work, &works[len(works)-1])
			default:
				records := rp.Records
				if batch.IsLegacy(records) {
					// An old producer's message set: a batch from here on.
					up, err := p.UpConvert(rc.ctx, records)
					if err != nil {
						sp.ErrorCode = errorCode(err)
						sp.ErrorMessage = errorMessage(err)
						break
					}
					records = up
				}
				if err := rc.checkSchemas(rt.Topic, p, records); err != nil {
					sp.ErrorCode, sp.ErrorMessage = kerr.InvalidRecord.Code, errorMessage(err)
					break
				}
				works = append(works, produceWork{topic: ti, part: len(st.Partitions), p: p, records: records})
				work = append(work, &works[len(works)-1])
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}

	size := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			size += len(rp.Records)
		}
	}
	rc.chargeQuota(quota.ProducerByteRate, size)

	// Append every partition of this request before reading the next
	// request from the connection: that keeps per-partition order across
	// pipelined requests, while all partitions of the request share one
	// group commit. Every append only places its batch (AppendAsync), so
	// the next pipelined request joins the same group commit; acks=0 and 1
	// then wait until the group is written (which holds the connection's
	// next request back while the WAL is behind), and acks=all waits for
	// the high watermark below, off the read path.
	appendOne := func(w *produceWork) {
		if w.forward {
			w.res, w.held, w.err = rc.conn.srv.cfg.Delays.HoldForwarded(rc.ctx, w.p, w.records)
		} else {
			w.res, w.err = w.p.AppendAsync(rc.ctx, w.records)
		}
		if errors.Is(w.err, log.ErrDelayed) {
			if d := rc.conn.srv.cfg.Delays; d != nil && req.TransactionID != nil {
				w.res, w.held, w.err = d.HoldTxn(rc.ctx, w.p, w.records, *req.TransactionID)
			} else if d != nil {
				w.res, w.held, w.err = d.Hold(rc.ctx, w.p, w.records)
			} else {
				w.res, w.err = w.p.AppendHeld(rc.ctx, w.records)
			}
		}
		if w.err == nil {
			n := recordCount(w.records)
			w.last = w.res.BaseOffset + int64(n) - 1
			rc.producedTraffic(w, n)
		}
	}
	appendAll(work, size, appendOne)
	if req.Acks != -1 {
		for _, w := range work {
			if w.err == nil {
				w.err = w.res.WaitWritten(rc.ctx)
			}
			if w.err == nil && w.held != nil {
				w.err = w.held(rc.ctx, false)
			}
		}
	}
	fill := func(w *produceWork, err error) {
		sp := &resp.Topics[w.topic].Partitions[w.part]
		if err != nil {
			sp.ErrorCode = errorCode(err)
			sp.ErrorMessage = errorMessage(err)
			var re *batch.RecordErrors
			if errors.As(err, &re) {
				// KIP-467: the refused records by index, so that a client
				// fails those with the error and the rest of the batch as
				// innocent bystanders. The message is Kafka's own.
				msg := re.Error()
				sp.ErrorMessage = &msg
				for _, r := range re.Records {
					re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
					re.RelativeOffset = r.Index
					m := r.Message
					re.ErrorMessage = &m
					sp.ErrorRecords = append(sp.ErrorRecords, re)
				}
			}
			return
		}
		sp.BaseOffset = w.res.BaseOffset
		sp.LogAppendTime = w.res.LogAppendTime
		sp.LogStartOffset = w.p.LogStartOffset()
	}

	if req.Acks == 0 {
		rc.produceErrors(resp, work, fill)
		return nil
	}
	if req.Acks != 1 && req.Acks != -1 {
		return done(resp)
	}
	if req.Acks != -1 {
		for _, w := range work {
			fill(w, w.err)
		}
		return done(resp)
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	return func() kmsg.Response {
		ctx, cancel := context.WithTimeout(rc.ctx, timeout)
		defer cancel()
		for _, w := range work {
			if w.err != nil {
				fill(w, w.err)
				continue
			}
			fill(w, waitDurable(ctx, w))
		}
		return resp
	}
}

// parallelAppendBytes is the request size from which partitions are
// validated and appended by several goroutines: below it one goroutine is
// cheaper than starting others (a producer spreading small batches over
// thousands of partitions sends exactly such requests); above it, the
// decompression of compressed batches is worth spreading over the cores.
const parallelAppendBytes = 1 << 20

// appendAll runs appendOne for every partition of a request: in this
// goroutine, or, for a large request of several partitions, on up to
// GOMAXPROCS goroutines.
func appendAll(work []*produceWork, size int, appendOne func(*produceWork)) {
	workers := min(len(work), runtime.GOMAXPROCS(0))
	if workers <= 1 || size < parallelAppendBytes {
		for _, w := range work {
			appendOne(w)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(work)); i = next.Add(1) - 1 {
				appendOne(work[i])
			}
		}()
	}
	wg.Wait()
}

func internalTopicMessage(topic string) *string {
	s := "Cannot append to internal topic " + topic
	return &s
}

// waitDurable blocks until w's records are durable (the partition's high
// watermark passes them). A leadership change since the append fails with
// NOT_LEADER_OR_FOLLOWER: the client retries, at the new leader.
func waitDurable(ctx context.Context, w *produceWork) error {
	err := w.p.WaitDurable(ctx, w.res, w.last)
	if err == nil && w.held != nil {
		err = w.held(ctx, true)
	}
	if err != nil && ctx.Err() != nil && ctx.Err() != context.DeadlineExceeded {
		return log.ErrClosed // the connection is closing
	}
	return err
}

// recordCount sums lastOffsetDelta+1 over the batches in a validated
// records field. Batch layout: baseOffset int64 @0, batchLength int32 @8,
// lastOffsetDelta int32 @23.
func recordCount(b []byte) int {
	n := 0
	for len(b) >= 27 {
		l := int(int32(binary.BigEndian.Uint32(b[8:])))
		n += int(int32(binary.BigEndian.Uint32(b[23:]))) + 1
		if l+12 > len(b) || l < 0 {
			break
		}
		b = b[12+l:]
	}
	return n
}
