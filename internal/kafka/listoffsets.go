package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
)

// ListOffsets v1-v11. v1 is the KIP-896 floor; v2 adds isolation level;
// v6+ flexible; v7 adds max timestamp (-3, KIP-734); v8 earliest-local (-4,
// KIP-405), which equals earliest here because all data is in one tier;
// v9 latest-tiered (-5, KIP-1005) and v11 earliest-pending-upload (-6,
// KIP-1023) answer offset -1, as from a Kafka topic without remote
// storage; v10's timeout (KIP-1075) bounds remote lookups, which there are
// none of. Latest (-1) is answered once the appends made before the
// request are durable (at most latestWait), off the connection's read path.
func init() { register(kmsg.ListOffsets, 1, 11, handleListOffsets) }

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
		return resp
	}
}
