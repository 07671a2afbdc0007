package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers v0 (flexible, KIP-664): the idempotent and
// transactional producers active on partitions this broker leads, with
// their epoch, last sequence, last write time and open transaction's first
// offset. Kafka's kafka-transactions.sh describe-producers and the admin
// clients use it to find hanging transactions. As Kafka, a partition led
// by another broker is NOT_LEADER_OR_FOLLOWER: its producer state here is
// not current (cluster mode), and a caller acting on it (delayed
// delivery's next sequence) must ask the leader.
func init() { register(kmsg.DescribeProducers, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeProducersRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, id := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = id
			p, err := b.Partition(rt.Topic, id)
			if !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic) {
				err = errTopicAuthorization
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				sp.ErrorMessage = errorMessage(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !p.Led() {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = pi.ProducerID
				ap.ProducerEpoch = int32(pi.Epoch)
				ap.LastSequence = pi.LastSequence
				ap.LastTimestamp = pi.LastTimestamp
				ap.CoordinatorEpoch = -1
				ap.CurrentTxnStartOffset = pi.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}
