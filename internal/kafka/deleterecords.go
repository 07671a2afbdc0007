package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteRecords v0-v2 (v2 flexible): advances a partition's log start
// offset; -1 means "up to the high watermark".
func init() { register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p, err := b.Partition(rt.Topic, rp.Partition)
			if !rc.authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, rt.Topic) {
				err = errTopicAuthorization
			}
			if err == nil {
				var lw int64
				if lw, err = p.DeleteRecords(rc.ctx, rp.Offset); err == nil {
					sp.LowWatermark = lw // Kafka answers -1 with any error
				}
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}
