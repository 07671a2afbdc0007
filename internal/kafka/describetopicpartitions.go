package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/log"
)

// DescribeTopicPartitions v0 (KIP-966): Metadata's topic half, paged. The
// Java admin client (3.8+) describes topics with it when a broker offers
// it. Topics are answered in name order, at most
// maxDescribePartitions partitions per response (less if the request
// asks); a topic cut short, or the next topic once the limit is reached,
// is named in NextCursor for the client's next request. An empty topic
// list means every topic the client may describe. sluice keeps no
// eligible-leader-replica sets (it has no replicas to elect from: storage
// is shared), so those lists are empty, as from a Kafka cluster with
// ELR off.
func init() { register(kmsg.DescribeTopicPartitions, 0, 0, handleDescribeTopicPartitions) }

// maxDescribePartitions is Kafka's max.request.partition.size.limit
// default: the most partitions one DescribeTopicPartitions response holds.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)

	all := len(req.Topics) == 0
	cursorTopic := ""
	if req.Cursor != nil {
		cursorTopic = req.Cursor.Topic
	}
	var names []string
	if all {
		for _, t := range b.Engine().Topics() {
			if t.Name >= cursorTopic {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic >= cursorTopic {
				names = append(names, t.Topic)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if req.Cursor != nil {
			if _, ok := slices.BinarySearch(names, cursorTopic); !ok {
				// As Kafka: the cursor's topic must be one of those asked for.
				for _, t := range req.Topics {
					rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
					rt.Topic = kmsg.StringPtr(t.Topic)
					rt.ErrorCode = kerr.InvalidRequest.Code
					resp.Topics = append(resp.Topics, rt)
				}
				return done(resp)
			}
		}
	}

	// Topics the client may not describe are left out of a listing of all
	// topics and refused by name otherwise (without their IDs), after the
	// others, as Kafka does.
	var refused []kmsg.DescribeTopicPartitionsResponseTopic
	names = slices.DeleteFunc(names, func(name string) bool {
		if rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
			return false
		}
		if !all {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			refused = append(refused, rt)
		}
		return true
	})

	remaining := min(int32(maxDescribePartitions), req.ResponsePartitionLimit)
	for _, name := range names {
		if remaining <= 0 {
			if remaining == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			}
			break
		}
		t, ok := b.Engine().Topic(name)
		if !ok {
			if !all {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic = kmsg.StringPtr(name)
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if broker.ValidateTopicName(name) != nil {
					rt.ErrorCode = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		first := int32(0)
		if req.Cursor != nil && name == cursorTopic {
			first = max(req.Cursor.Partition, 0)
		}
		rt, next := describeTopicPartitions(rc, b, t, first, remaining)
		resp.Topics = append(resp.Topics, rt)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
		remaining -= int32(len(rt.Partitions))
	}
	resp.Topics = append(resp.Topics, refused...)
	return done(resp)
}

// describeTopicPartitions describes up to limit partitions of t from
// first on, and returns the partition to continue from, or -1 when none
// is left.
func describeTopicPartitions(rc *reqCtx, b *broker.Broker, t log.TopicInfo, first, limit int32) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	rt.Topic = kmsg.StringPtr(t.Name)
	rt.TopicID = t.ID
	rt.IsInternal = t.Internal
	rt.AuthorizedOperations = rc.authorizedOps(true, topicOperations, kmsg.ACLResourceTypeTopic, t.Name)
	rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	next := int32(-1)
	for p := first; p < t.Partitions; p++ {
		if int32(len(rt.Partitions)) == limit {
			next = p
			break
		}
		rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		rp.Partition = p
		// Failing over, no leader and no error, as Kafka answers for a
		// partition whose leader is offline.
		pl := leadership(b, t, p)
		rp.LeaderID, rp.LeaderEpoch, rp.Replicas, rp.ISR = pl.leader, pl.epoch, pl.replicas, pl.isr
		rp.EligibleLeaderReplicas, rp.LastKnownELR, rp.OfflineReplicas = []int32{}, []int32{}, []int32{}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt, next
}
