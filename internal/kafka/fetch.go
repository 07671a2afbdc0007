package kafka

import (
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/quota"
)

// Fetch v0-v16. v0-v3 are Kafka 3.9's old fetchers (KIP-896 dropped them in
// Kafka 4): they read message sets of magic 0 (v0-v1) or 1 (v2-v3), so
// their records are down-converted (log.Partition.DownConvert; zstd
// batches answer UNSUPPORTED_COMPRESSION_TYPE, as Kafka's KIP-110 has it),
// once, when the answer is final: a long poll compares min_bytes with the
// stored batches that are not control batches.
// v0-v2 have no response size limit and a hard partition limit: an answer
// longer than the partition's max bytes is cut there, leaving a partial
// message the client skips, or, alone, grows its fetch size for, as
// Kafka's were; v3 adds the response limit and KIP-74's "first batch
// whole". v4 adds isolation levels; v7+ would open fetch sessions
// (KIP-227): we answer session id 0, which every client treats as
// "sessionless, send full requests"; v12+ flexible; v13+ names topics by id.
//
// As in Kafka, a full fetch (epoch 0 or -1) is served whatever session id
// it names: it closes that session, and we hold none. Only an incremental
// fetch (epoch > 0) needs a session, and none of ours exists.
func init() { register(kmsg.Fetch, 0, 16, handleFetch) }

type fetchPart struct {
	topic, part int
	p           *log.Partition
	offset      int64
	maxBytes    int32
}

func handleFetch(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	byID := rc.version() >= 13

	if req.SessionEpoch > 0 {
		// An incremental fetch: we never hand out sessions, so any id is
		// unknown.
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return done(resp)
	}

	var parts []fetchPart
	hasError := false
	names := make([]string, 0, len(req.Topics)) // per response topic, for leader hints
	for ti, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		name := rt.Topic
		unknownID := false
		if byID {
			if t, ok := b.Engine().TopicByID(rt.TopicID); ok {
				name = t.Name
			} else {
				unknownID = true
			}
		}
		names = append(names, name)
		denied := !unknownID && !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.RecordBatches = []byte{}
			sp.HighWatermark = -1
			sp.LastStableOffset = -1
			sp.LogStartOffset = -1
			if unknownID {
				sp.ErrorCode = kerr.UnknownTopicID.Code
				hasError = true
			} else if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				hasError = true
			} else if p, err := b.Partition(name, rp.Partition); err != nil {
				sp.ErrorCode = errorCode(err)
				hasError = true
			} else if code := leaderCheck(rp.CurrentLeaderEpoch, p); code != 0 {
				sp.ErrorCode = code
				hasError = true
			} else {
				parts = append(parts, fetchPart{topic: ti, part: len(st.Partitions), p: p, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}

	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	readCommitted := req.IsolationLevel == 1
	var sent int // bytes of records in the answer, for the consumer quota
	complete := func() kmsg.Response {
		deadline := time.Now().Add(maxWait)
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			// Subscribe before reading so an append between the read and
			// the wait is not missed.
			waits := make([]<-chan struct{}, len(parts))
			for i := range parts {
				waits[i] = parts[i].p.Wait()
			}
			n, errs := readFetch(rc, req, resp, parts, readCommitted)
			sent = n
			remaining := time.Until(deadline)
			if hasError || errs || n >= int(req.MinBytes) || remaining <= 0 || len(parts) == 0 {
				return resp
			}
			if timer == nil {
				timer = time.NewTimer(remaining)
			} else {
				timer.Reset(remaining)
			}
			if !waitAny(waits, timer.C, rc.conn.closed) {
				if isClosed(rc.conn.closed) {
					return nil
				}
				// Timed out: the last read is the answer.
				return resp
			}
		}
	}
	return func() kmsg.Response {
		r := complete()
		if r != nil {
			// Counted before any down-conversion: the records the log
			// served.
			rc.fetchedTraffic(resp, parts)
			if v := rc.version(); v <= 3 {
				// Converted once, for the answer sent, not on every read
				// of a long poll (Kafka's lazy down-conversion, KIP-283).
				sent = downConvertAnswer(rc, resp, parts, v)
			}
			rc.chargeQuota(quota.ConsumerByteRate, sent)
			addFetchLeaderHints(rc, resp, names)
		}
		return r
	}
}

// readFetch fills every partition's response and returns the bytes returned
// and whether any partition errored.
func readFetch(rc *reqCtx, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, parts []fetchPart, readCommitted bool) (int, bool) {
	total := 0
	budget := int64(req.MaxBytes)
	if budget <= 0 {
		budget = 1 << 62
	}
	if c := int64(rc.conn.srv.cfg.FetchMaxBytes); c > 0 && c < budget {
		budget = c
	}
	errs := false
	minOne := true // KIP-74: the first non-empty partition may exceed limits by one batch
	for _, fp := range parts {
		sp := &resp.Topics[fp.topic].Partitions[fp.part]
		limit := int64(fp.maxBytes)
		if limit > budget {
			limit = budget
		}
		if limit < 0 {
			limit = 0
		}
		var res log.ReadResult
		var err error
		if readCommitted {
			res, err = fp.p.ReadCommitted(rc.ctx, fp.offset, int32(limit), minOne)
		} else {
			res, err = fp.p.Read(rc.ctx, fp.offset, int32(limit), minOne)
		}
		sp.HighWatermark = fp.p.HighWatermark()
		sp.LogStartOffset = fp.p.LogStartOffset()
		sp.LastStableOffset = fp.p.LastStableOffset()
		sp.PreferredReadReplica = -1
		// Empty, not null: librdkafka rejects a null (-1 length) record set.
		sp.RecordBatches = []byte{}
		sp.ErrorCode = 0
		if err != nil {
			sp.ErrorCode = errorCode(err)
			errs = true
			if errors.Is(err, log.ErrOffsetOutOfRange) {
				continue
			}
			continue
		}
		sp.HighWatermark = res.HighWatermark
		sp.LastStableOffset = res.LastStableOffset
		sp.LogStartOffset = res.LogStartOffset
		if readCommitted {
			// The aborted transactions with data in what was read (Kafka
			// uses [fetch offset, LSO) too); the client drops their batches.
			aborted := fp.p.AbortedTransactions(fp.offset, res.LastStableOffset)
			sp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(aborted))
			for _, a := range aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, at)
			}
		}
		if len(res.Records) > 0 {
			sp.RecordBatches = res.Records
			if rc.version() <= 3 {
				// Control batches are not in a legacy answer: a read of
				// markers alone is nothing to return early for.
				total += batch.DataBytes(res.Records)
			} else {
				total += len(res.Records)
			}
			budget -= int64(len(res.Records))
			minOne = false
		}
	}
	return total, errs
}

// downConvertAnswer turns the batches read for a Fetch v0-v3 into message
// sets (legacyRecords) and returns the bytes answered; a partition whose
// records cannot be converted answers the error, no records.
func downConvertAnswer(rc *reqCtx, resp *kmsg.FetchResponse, parts []fetchPart, v int16) int {
	total := 0
	for _, fp := range parts {
		sp := &resp.Topics[fp.topic].Partitions[fp.part]
		if sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 {
			continue
		}
		// The read kept to the limits; conversion adds a few percent of
		// framing, which the slack allows for.
		raw := sp.RecordBatches
		out, err := legacyRecords(rc, fp, raw, v, len(raw)+len(raw)/8)
		if err != nil {
			sp.ErrorCode = errorCode(err)
			out = []byte{}
		}
		sp.RecordBatches = out
		total += len(out)
	}
	return total
}

// legacyRecords down-converts a Fetch v0-v3 read to the message format of
// version v: magic 0 for v0-v1, 1 for v2-v3, at most about limit bytes
// (the first batch whole). v0-v2's partition limit is hard: past it the
// set is cut.
func legacyRecords(rc *reqCtx, fp fetchPart, records []byte, v int16, limit int) ([]byte, error) {
	magic := int8(1)
	if v <= 1 {
		magic = 0
	}
	out, err := fp.p.DownConvert(rc.ctx, nil, records, magic, limit)
	if err != nil {
		return nil, err
	}
	if v <= 2 && len(out) > int(max(fp.maxBytes, 0)) {
		out = out[:max(fp.maxBytes, 0)]
	}
	return out, nil
}

// checkLeaderEpoch compares a client's current leader epoch with ours, as
// KIP-320 specifies: -1 skips the check.
// leaderCheck is checkLeaderEpoch for a partition, which must be led here
// (cluster mode) to be served: NOT_LEADER_OR_FOLLOWER otherwise.
func leaderCheck(client int32, p *log.Partition) int16 {
	if !p.Led() {
		return kerr.NotLeaderForPartition.Code
	}
	return checkLeaderEpoch(client, p.LeaderEpoch())
}

func checkLeaderEpoch(client, ours int32) int16 {
	switch {
	case client == -1:
		return 0
	case client < ours:
		return kerr.FencedLeaderEpoch.Code
	case client > ours:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// waitAny returns true when any of chans fires, false on timeout or close.
// One select over every channel (reflect.Select for more than one), so a
// long-polling fetch over many partitions costs no goroutines; past
// waitChunk channels, one goroutine per chunk of them, since a select
// takes at most 65536 cases (a fetch over 100,000 partitions panicked
// there) and locks every channel it holds.
func waitAny(chans []<-chan struct{}, timeout <-chan time.Time, closed <-chan struct{}) bool {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timeout:
			return false
		case <-closed:
			return false
		}
	}
	if len(chans) <= waitChunk {
		return selectAny(chans, timeout, closed) >= 0
	}
	fired := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for i := 0; i < len(chans); i += waitChunk {
		chunk := chans[i:min(i+waitChunk, len(chans))]
		go func() {
			if selectAny(chunk, stop, nil) >= 0 {
				select {
				case fired <- struct{}{}:
				default:
				}
			}
		}()
	}
	select {
	case <-fired:
		return true
	case <-timeout:
		return false
	case <-closed:
		return false
	}
}

// waitChunk is the most channels one select waits on.
const waitChunk = 4096

// selectAny waits for one of chans, a or b (either may be nil, which
// never fires) and returns the index in chans that fired, or -1 for a or b.
func selectAny[T any](chans []<-chan struct{}, a <-chan T, b <-chan struct{}) int {
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(a)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(b)})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen - 2
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
