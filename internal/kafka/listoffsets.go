package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets v1-v8. v1 is the KIP-896 floor; v2 adds isolation level; v6+
// flexible; v7 adds max timestamp (-3, KIP-734); v8 earliest-local (-4,
// KIP-405), which equals earliest here because all data is in one tier.
func init() { register(kmsg.ListOffsets, 1, 8, handleListOffsets) }

func handleListOffsets(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
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
				sp.Offset = p.HighWatermark()
				if req.IsolationLevel == 1 {
					sp.Offset = p.LastStableOffset()
				}
				sp.LeaderEpoch = p.LeaderEpoch()
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
				if rp.Timestamp < 0 {
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
	return done(resp)
}
