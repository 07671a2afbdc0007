package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
)

// ListOffsets v0-v11. v0 is Kafka 3.9's floor (KIP-896 dropped it in Kafka
// 4): it answers a list of offsets (oldStyleOffsets, see listOffsetsV0);
// v1 one offset and its timestamp; v2 adds isolation level;
// v6+ flexible; v7 adds max timestamp (-3, KIP-734); v8 earliest-local (-4,
// KIP-405), which equals earliest here because all data is in one tier;
// v9 latest-tiered (-5, KIP-1005) and v11 earliest-pending-upload (-6,
// KIP-1023) answer offset -1, as from a Kafka topic without remote
// storage; v10's timeout (KIP-1075) bounds remote lookups, which there are
// none of. Latest (-1) is answered once the appends made before the
// request are durable (at most latestWait), off the connection's read path.
func init() { register(kmsg.ListOffsets, 0, 11, handleListOffsets) }

// latestWait bounds how long ListOffsets(latest) waits for appends made
// before it to become durable; after it, it answers the high watermark as
// it is.
const latestWait = time.Second

// latestWork is a ListOffsets(latest) partition to fill in.
type latestWork struct {
	topic, part int // indexes into the response
	p           *log.Partition
	end         int64 // log end offset when the request arrived
}

func handleListOffsets(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	var latest []latestWork
	var old []oldStyle // v0 only
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp = -1
			sp.Offset = -1
			sp.LeaderEpoch = -1
			p, err := b.Partition(rt.Topic, rp.Partition)
			if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic) {
				err = errTopicAuthorization
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if code := leaderCheck(rp.CurrentLeaderEpoch, p); code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if rc.version() == 0 {
				if rp.MaxNumOffsets < 0 {
					sp.ErrorCode = kerr.InvalidRequest.Code
					st.Partitions = append(st.Partitions, sp)
					continue
				}
				old = append(old, oldStyle{topic: len(resp.Topics), part: len(st.Partitions), p: p,
					ts: rp.Timestamp, max: rp.MaxNumOffsets})
				if rp.Timestamp < -2 {
					// Not a v0 query (-3 and below came later): no offset
					// was written before such a time.
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			switch rp.Timestamp {
			case -1: // latest: the high watermark, or for read_committed the last stable offset
				// Filled in by the completion, once what was appended
				// before this request is durable.
				latest = append(latest, latestWork{topic: len(resp.Topics), part: len(st.Partitions), p: p, end: p.LogEndOffset()})
			case -2, -4: // earliest, earliest-local
				sp.Offset = p.LogStartOffset()
				sp.LeaderEpoch = p.LeaderEpoch()
			case -3: // max timestamp
				off, ts, err := p.MaxTimestamp(rc.ctx)
				if err != nil {
					sp.ErrorCode = errorCode(err)
					break
				}
				sp.Offset, sp.Timestamp = off, ts
				if off >= 0 {
					sp.LeaderEpoch = p.LeaderEpoch()
				}
			default:
				if rp.Timestamp < 0 { // -5, -6: nothing in a remote tier
					sp.ErrorCode = 0
					sp.Offset = -1
					break
				}
				off, ts, err := p.OffsetForTimestamp(rc.ctx, rp.Timestamp)
				if err != nil {
					sp.ErrorCode = errorCode(err)
					break
				}
				if req.IsolationLevel == 1 && off >= p.LastStableOffset() {
					off, ts = -1, -1 // as Kafka: nothing at or above the last fetchable offset
				}
				sp.Offset, sp.Timestamp = off, ts
				if off >= 0 {
					sp.LeaderEpoch = p.LeaderEpoch()
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(latest) == 0 {
		listOffsetsV0(resp, old)
		return done(resp)
	}
	return func() kmsg.Response {
		// The high watermark is the durable end: an acks=1 answer does not
		// wait for it. Waiting here for what was appended before the
		// request (one group commit, bounded) lets a client that produced
		// with acks=1 and then asks for the latest offset see its records,
		// as it would on a single-replica Kafka partition; nothing that is
		// not durable is ever reported.
		ctx, cancel := context.WithTimeout(rc.ctx, latestWait)
		defer cancel()
		for _, w := range latest {
			w.p.WaitHighWatermark(ctx, w.end)
			sp := &resp.Topics[w.topic].Partitions[w.part]
			sp.Offset = w.p.HighWatermark()
			if req.IsolationLevel == 1 {
				sp.Offset = w.p.LastStableOffset()
			}
			sp.LeaderEpoch = w.p.LeaderEpoch()
		}
		listOffsetsV0(resp, old)
		return resp
	}
}

// oldStyle is a ListOffsets v0 partition to answer with a list of offsets.
type oldStyle struct {
	topic, part int // indexes into the response
	p           *log.Partition
	ts          int64
	max         int32
}

// listOffsetsV0 turns the single offsets found for v0 partitions into v0's
// lists: Kafka's legacy answer (Log.legacyFetchOffsetsBefore) is, newest
// first, at most max_num_offsets of the offsets starting a segment written
// before the time asked, topped by the high watermark for latest. sluice
// has no per-partition segments, so its one "segment" starts at the log
// start offset: latest (-1) answers [high watermark, log start], earliest
// (-2) [log start], and a time t the first offset at or after t (the high
// watermark if none) followed by the log start, or nothing when no record
// is older than t. Entries are never repeated (an empty log answers [start]
// once).
func listOffsetsV0(resp *kmsg.ListOffsetsResponse, old []oldStyle) {
	for _, o := range old {
		sp := &resp.Topics[o.topic].Partitions[o.part]
		sp.OldStyleOffsets = []int64{}
		if sp.ErrorCode != 0 {
			continue
		}
		start := o.p.LogStartOffset()
		var offs []int64
		switch {
		case o.ts == -2:
			offs = []int64{start}
		case o.ts == -1:
			offs = []int64{sp.Offset, start}
		case o.ts >= 0:
			if at := sp.Offset; at < 0 { // every record is older than t
				offs = []int64{o.p.HighWatermark(), start}
			} else if at > start {
				offs = []int64{at, start}
			}
		}
		if len(offs) == 2 && offs[0] <= offs[1] {
			offs = offs[1:]
		}
		if len(offs) > int(o.max) {
			offs = offs[:o.max]
		}
		sp.OldStyleOffsets = append(sp.OldStyleOffsets, offs...)
		// v0 carries only the list; the single fields stay as v1 would have
		// them, unsent.
	}
}
