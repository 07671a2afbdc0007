package delay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// ForwardClientID is the client id a broker forwards held records to the
// delay store partition's leader with (cluster mode): the only producer
// the leader takes __sluice_delay records from, and only with
// ClusterAction on the cluster.
const ForwardClientID = "sluice-delay"

// Remote is how the service reaches partitions led by other brokers in
// cluster mode: a kgo client on the inter-broker listener, configured with
// acks=all (kgo.RequiredAcks must match the raw requests' acks) and
// ForwardClientID.
type Remote struct {
	cl *kgo.Client
	// leader is the broker id leading a partition, from the cluster's own
	// view (kgo sends a raw Produce to any broker, not to the leader).
	leader func(topic string, partition int32) (int32, bool)
}

// ErrNoLeader: no broker leads the partition at the moment (retried).
var ErrNoLeader = errors.New("delay: the partition has no leader at the moment")

// NewRemote wraps cl; leader names the broker leading a partition.
func NewRemote(cl *kgo.Client, leader func(topic string, partition int32) (int32, bool)) *Remote {
	return &Remote{cl: cl, leader: leader}
}

// IsForward implements the produce path's check (kafka.Delayer).
func (s *Service) IsForward(topic, clientID string) bool {
	return topic == Topic && clientID == ForwardClientID
}

// produce sends one batch to the leader of topic-partition with acks=all.
func (r *Remote) produce(ctx context.Context, topic string, partition int32, records []byte) (int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	id, ok := r.leader(topic, partition)
	if !ok {
		return 0, fmt.Errorf("producing to %s-%d: %w", topic, partition, ErrNoLeader)
	}
	kresp, err := r.cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		r.cl.ForceMetadataRefresh()
		return 0, fmt.Errorf("producing to %s-%d: %w", topic, partition, err)
	}
	resp := kresp.(*kmsg.ProduceResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) {
					r.cl.ForceMetadataRefresh()
				}
				msg := ""
				if p.ErrorMessage != nil {
					msg = ": " + *p.ErrorMessage
				}
				return 0, fmt.Errorf("producing to %s-%d: %w%s", topic, partition, err, msg)
			}
			return p.BaseOffset, nil
		}
	}
	return 0, fmt.Errorf("producing to %s-%d: no answer for the partition", topic, partition)
}

// lastSeq asks the leader of t for pid's last sequence (DescribeProducers).
func (r *Remote) lastSeq(ctx context.Context, t Target, pid int64) (int32, bool, error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = t.Topic, []int32{t.Partition}
	req.Topics = append(req.Topics, rt)
	for _, sh := range r.cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			r.cl.ForceMetadataRefresh()
			return 0, false, sh.Err
		}
		resp := sh.Resp.(*kmsg.DescribeProducersResponse)
		for _, tt := range resp.Topics {
			for _, p := range tt.Partitions {
				if tt.Topic != t.Topic || p.Partition != t.Partition {
					continue
				}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					// A broker that no longer (or not yet) leads t does
					// not know the sequence: asked again after a refresh.
					r.cl.ForceMetadataRefresh()
					return 0, false, err
				}
				for _, ap := range p.ActiveProducers {
					if ap.ProducerID == pid && ap.ProducerEpoch == 0 && ap.LastSequence >= 0 {
						return ap.LastSequence, true, nil
					}
				}
				return 0, false, nil
			}
		}
	}
	return 0, false, fmt.Errorf("DescribeProducers for %s: no answer", t)
}

// HoldForwarded appends records another broker held to store partition p
// and indexes them (kafka.Delayer).
func (s *Service) HoldForwarded(ctx context.Context, p *log.Partition, payload []byte) (log.AppendResult, func(context.Context, bool) error, error) {
	sp, err := s.partByID(p.ID())
	if err != nil {
		return log.AppendResult{}, nil, fmt.Errorf("%w: %w", log.ErrNotLeader, err)
	}
	// A producer's retry can forward records that were held, delivered
	// and tombstoned since: those this partition has pending or finished
	// lately are left out (their offsets stay, empty), as Hold does for a
	// local store partition. The replay must be in first.
	select {
	case <-sp.ready:
	case <-sp.done:
		return log.AppendResult{}, nil, fmt.Errorf("%w: %w", log.ErrNotLeader, ErrNotOwned)
	case <-ctx.Done():
		return log.AppendResult{}, nil, ctx.Err()
	}
	if payload, err = sp.dropKnown(ctx, payload); err != nil {
		return log.AppendResult{}, nil, err
	}
	if len(payload) >= batch.HeaderSize && batch.Attributes(payload)&batch.AttrTransactional != 0 && batch.ProducerID(payload) >= 0 {
		return sp.holdForwardedTxn(ctx, payload)
	}
	res, err := p.AppendHeld(ctx, payload)
	if err != nil {
		return res, nil, err
	}
	// The batches' offsets follow one another from the base.
	var bases []int64
	off := res.BaseOffset
	for b := payload; len(b) >= batch.HeaderSize; {
		size, err := batch.Size(b)
		if err != nil || size > len(b) {
			break
		}
		bases = append(bases, off)
		off += int64(binary.BigEndian.Uint32(b[batch.OffLastOffsetDelta:])) + 1
		b = b[size:]
	}
	by := sp.payloadEntries(ctx, payload, bases)
	n := 0
	for t, es := range by {
		sp.add(t, es)
		n += len(es)
	}
	s.m.held.Add(float64(n))
	return res, nil, nil
}

func (s *Service) partByID(i int32) (*part, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[i]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %s-%d", ErrNotOwned, Topic, i)
}

// retriable reports whether a remote error may pass (leadership moving).
func retriable(err error) bool {
	if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.UnknownTopicOrPartition)
	}
	return true
}

// dropKnown rewrites forwarded store batches without the entries this
// partition has pending or recently finished (batches keep their offsets
// and their codec). Compressed batches are decoded under the broker's
// decompression budget.
func (p *part) dropKnown(ctx context.Context, payload []byte) ([]byte, error) {
	var out []byte
	for b := payload; len(b) > 0; {
		size, err := batch.Size(b)
		if err != nil || size > len(b) {
			return nil, fmt.Errorf("%w: forwarded batch", log.ErrCorruptMessage)
		}
		x, err := p.p.DecodeRecords(ctx, b[:size])
		if err != nil {
			return nil, fmt.Errorf("delay: forwarded batch: %w", err)
		}
		h, recs := x.Header, x.Records
		keep := recs[:0]
		p.mu.Lock()
		for _, r := range recs {
			kind, t, off, err := ParseKey(r.Key)
			if err == nil && kind == kindEntry && r.Value != nil && p.known(p.target(t), off) {
				continue
			}
			keep = append(keep, r)
		}
		p.mu.Unlock()
		if len(keep) == int(h.RecordCount) {
			out = append(out, b[:size]...)
		} else {
			nb, err := batch.Rebuild(h, keep)
			if err != nil {
				x.Release()
				return nil, err
			}
			out = append(out, nb...)
		}
		x.Release()
		b = b[size:]
	}
	return out, nil
}

// payloadEntries reads the entries of a store payload appended to p with
// its batches at bases, by target (batches rebuilt by dropKnown keep their
// records' offset deltas, so an entry's offset is its batch's base plus
// its delta). Compressed batches are decoded under the broker's
// decompression budget, waiting for it even past ctx: the batches are
// appended already, and an entry left out here would wait for the next
// scan. A batch that does not decode (never: the payload was validated
// when appended) is left out.
func (p *part) payloadEntries(ctx context.Context, payload []byte, bases []int64) map[Target][]*entry {
	ctx = context.WithoutCancel(ctx)
	by := map[Target][]*entry{}
	for bi := 0; len(payload) > 0 && bi < len(bases); bi++ {
		size, err := batch.Size(payload)
		if err != nil || size > len(payload) {
			break
		}
		x, err := p.p.DecodeRecords(ctx, payload[:size])
		payload = payload[size:]
		if err != nil {
			p.s.log.Warn("delay store: an appended batch does not decode", "partition", p.id, "offset", bases[bi], "err", err)
			continue
		}
		for _, r := range x.Records {
			kind, t, res, err := ParseKey(r.Key)
			if err != nil || kind != kindEntry || r.Value == nil {
				continue
			}
			if due, err := entryDue(r.Value); err == nil {
				by[t] = append(by[t], &entry{due: due, off: bases[bi] + int64(r.OffsetDelta), res: res})
			}
		}
		x.Release()
	}
	return by
}

// holdForwardedTxn appends forwarded entries held in a transaction (the
// forwarding broker added this store partition to the transaction first)
// and notes them as pending their transaction's outcome.
func (p *part) holdForwardedTxn(ctx context.Context, payload []byte) (log.AppendResult, func(context.Context, bool) error, error) {
	bases, first, last, lastOff, err := p.appendTxn(ctx, payload)
	if err != nil {
		return first, nil, err
	}
	pid := batch.ProducerID(payload)
	for t, es := range p.payloadEntries(ctx, payload, bases) {
		p.addTxn(t, pid, es)
	}
	return first, func(ctx context.Context, durable bool) error {
		if durable {
			return p.p.WaitDurable(ctx, last, lastOff)
		}
		return last.WaitWritten(ctx)
	}, nil
}

// JoinTxn adds topic-partition to transactional id's ongoing transaction
// on the broker coordinating it (AddPartitionsToTxn, routed there by the
// client): what the produce path does when the coordinator is elsewhere.
func (r *Remote) JoinTxn(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	kresp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return fmt.Errorf("%w: %v", log.ErrNotLeader, err)
	}
	if err := kerr.ErrorForCode(kresp.ErrorCode); err != nil {
		return err
	}
	for _, t := range kresp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	for _, x := range kresp.Transactions {
		for _, t := range x.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
