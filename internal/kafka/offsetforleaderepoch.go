package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetForLeaderEpoch v0-v4, Kafka 3.9's range (KIP-896 dropped v0-v1 in
// Kafka 4). v1 adds the leader epoch to the answer (kmsg leaves it out of
// v0), v2 the current leader epoch fencing (-1, unchecked, before), v3 the
// replica id; v4+ flexible.
func init() { register(kmsg.OffsetForLeaderEpoch, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch = -1
			sp.EndOffset = -1
			p, err := b.Partition(rt.Topic, rp.Partition)
			if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic) {
				err = errTopicAuthorization
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
			} else if code := leaderCheck(rp.CurrentLeaderEpoch, p); code != 0 {
				sp.ErrorCode = code
			} else {
				sp.LeaderEpoch, sp.EndOffset = p.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}
