package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// OffsetFetch v0-v9, Kafka 3.9's range (KIP-896 dropped v0 in Kafka 4). v0
// read offsets ZooKeeper held in Kafka; sluice keeps one store, so v0 reads
// what any version committed, as v1 does. v2 adds the
// top-level error and null topics for "all", v5 leader epochs, v6+ is
// flexible, v7 require_stable (a partition with transactional offsets
// awaiting their marker answers UNSTABLE_OFFSET_COMMIT, retriable), v8 several groups per request (KIP-709), v9
// the KIP-848 member id and epoch, checked against consumer-protocol groups
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) and not against classic ones.
// Uncommitted partitions answer offset -1.
func init() { register(kmsg.OffsetFetch, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	co := rc.groups()

	stable := rc.version() >= 7 && req.RequireStable
	described := map[string]bool{} // topic -> may describe
	mayDescribe := func(topic string) bool {
		ok, seen := described[topic]
		if !seen {
			ok = rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
			described[topic] = ok
		}
		return ok
	}
	partCode := func(o group.FetchedOffset) int16 {
		if !mayDescribe(o.Topic) {
			return kerr.TopicAuthorizationFailed.Code
		}
		if stable && o.Unstable {
			return kerr.UnstableOffsetCommit.Code
		}
		return 0
	}
	fetch := func(id string, topics []group.TopicPartitions) ([]group.FetchedOffset, int16) {
		if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			return nil, kerr.GroupAuthorizationFailed.Code
		}
		offs, err := co.FetchOffsets(id, topics)
		if topics == nil { // every committed offset: only topics the client may describe
			offs = slices.DeleteFunc(offs, func(o group.FetchedOffset) bool { return !mayDescribe(o.Topic) })
		}
		if err != nil {
			// Partitions requested still get an entry carrying the error.
			for _, t := range topics {
				for _, p := range t.Partitions {
					offs = append(offs, group.FetchedOffset{Topic: t.Topic, Partition: p, Offset: -1, LeaderEpoch: -1})
				}
			}
		}
		return offs, errorCode(err)
	}

	if rc.version() >= 8 {
		for _, rg := range req.Groups {
			var topics []group.TopicPartitions
			if rg.Topics != nil {
				topics = []group.TopicPartitions{}
				for _, t := range rg.Topics {
					topics = append(topics, group.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			var offs []group.FetchedOffset
			var code int16
			if err := co.ValidateFetch(rg.Group, rg.MemberID, rg.MemberEpoch); err != nil {
				code = errorCode(err)
			} else {
				offs, code = fetch(rg.Group, topics)
			}
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			sg.ErrorCode = code
			for _, o := range offs {
				if n := len(sg.Topics); n == 0 || sg.Topics[n-1].Topic != o.Topic {
					st := kmsg.NewOffsetFetchResponseGroupTopic()
					st.Topic = o.Topic
					sg.Topics = append(sg.Topics, st)
				}
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition = o.Partition
				sp.Offset = o.Offset
				if sp.ErrorCode = partCode(o); sp.ErrorCode != 0 {
					sp.Offset = -1
				}
				sp.LeaderEpoch = o.LeaderEpoch
				md := o.Metadata
				sp.Metadata = &md
				st := &sg.Topics[len(sg.Topics)-1]
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return done(resp)
	}

	var topics []group.TopicPartitions
	if req.Topics != nil || rc.version() < 2 {
		topics = []group.TopicPartitions{}
		for _, t := range req.Topics {
			topics = append(topics, group.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	offs, code := fetch(req.Group, topics)
	resp.ErrorCode = code
	for _, o := range offs {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != o.Topic {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = o.Topic
			resp.Topics = append(resp.Topics, st)
		}
		sp := kmsg.NewOffsetFetchResponseTopicPartition()
		sp.Partition = o.Partition
		sp.Offset = o.Offset
		if sp.ErrorCode = partCode(o); sp.ErrorCode != 0 {
			sp.Offset = -1
		}
		sp.LeaderEpoch = o.LeaderEpoch
		md := o.Metadata
		sp.Metadata = &md
		if rc.version() < 2 {
			// v0-v1 have no top-level error: it goes on every partition.
			sp.ErrorCode = code
		}
		st := &resp.Topics[len(resp.Topics)-1]
		st.Partitions = append(st.Partitions, sp)
	}
	return done(resp)
}
