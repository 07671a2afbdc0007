package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// WriteTxnMarkers v0-v1. An inter-broker API, not one clients
// send: in cluster mode a transaction coordinator appends markers only to
// partitions it leads, and sends this to the leader of every other partition
// of a finished transaction (internal/txn's NewRemoteMarkers), as Kafka's
// TransactionMarkerChannelManager does. v0-v1 is Kafka 3.9's range (v1 only
// makes the request flexible; KIP-896 removed v0 in Kafka 4); v2
// (KIP-1228, the marker's transaction version) is not served.
//
// Each partition's marker is a control batch appended with the log engine
// (Partition.AppendControl), answered once durable; a partition this broker
// does not lead answers NOT_LEADER_OR_FOLLOWER and the coordinator retries
// at the new leader. As Kafka's KafkaApis, a marker written to
// __consumer_offsets also settles the transactional offsets this broker's
// group coordinator holds for the producer in that partition.
func init() { register(kmsg.WriteTxnMarkers, 0, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationClusterAction) {
		// Only brokers write markers (Kafka: CLUSTER_ACTION on the cluster).
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return done(resp)
	}
	return func() kmsg.Response {
		// Partitions are independent; their appends share group commits
		// when they run at once.
		var wg sync.WaitGroup
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
				for i, p := range t.Partitions {
					rp := &rt.Partitions[i]
					*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition = p
					wg.Add(1)
					go func() {
						defer wg.Done()
						rp.ErrorCode = errorCode(writeMarker(rc, t.Topic, p, m))
					}()
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		wg.Wait()
		return resp
	}
}

// writeMarker appends one marker and, in the offsets topic, settles the
// group coordinator's pending transactional offsets.
func writeMarker(rc *reqCtx, topic string, partition int32, m kmsg.WriteTxnMarkersRequestMarker) error {
	p, err := rc.broker().Engine().Partition(topic, partition)
	if err != nil {
		return err
	}
	if _, err := p.AppendControl(rc.ctx, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch); err != nil {
		return err
	}
	if topic == group.Topic {
		return rc.groups().CompleteTxn(rc.ctx, partition, m.ProducerID, m.Committed)
	}
	return nil
}
