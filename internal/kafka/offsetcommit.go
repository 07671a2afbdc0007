package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
)

// OffsetCommit v0-v9, Kafka 3.9's range (KIP-896 dropped v0-v1 in Kafka 4).
// v0 has no generation or member (kmsg leaves generation -1): a commit
// outside any generation, which an empty or unknown group accepts, as a v2+
// commit with generation -1; Kafka 3.9 kept v0 offsets in ZooKeeper, sluice
// stores them like the rest, so any OffsetFetch version reads them. v1 adds
// the generation, member and a per-partition commit timestamp (-1: now),
// from which an offset's retention then counts. v2-v4
// carry a retention time, v5 drops it, v6 adds leader epochs, v7 the static
// instance id, v8+ is flexible, v9 returns GROUP_ID_NOT_FOUND instead of
// ILLEGAL_GENERATION for a missing group. Offsets are answered once durable.
// In a KIP-848 group the generation is the member epoch (v9+ only;
// STALE_MEMBER_EPOCH when it is not the member's).
func init() { register(kmsg.OffsetCommit, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	b := rc.broker()
	r := group.CommitRequest{
		Group:       req.Group,
		MemberID:    req.MemberID,
		InstanceID:  req.InstanceID,
		Generation:  req.Generation,
		RetentionMs: -1,
		Version:     rc.version(),
	}
	if v := rc.version(); v <= 4 && req.RetentionTimeMillis >= 0 {
		r.RetentionMs = req.RetentionTimeMillis
	}
	type slot struct{ t, p int }
	var slots []slot
	groupDenied := !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group)
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		topicDenied := !rc.authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if groupDenied {
				sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			} else if topicDenied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if _, err := b.Partition(rt.Topic, rp.Partition); err != nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				epoch := int32(-1)
				if rc.version() >= 6 {
					epoch = rp.LeaderEpoch
				}
				var at int64 // the commit's own time
				if rc.version() == 1 {
					at = rp.Timestamp
				}
				r.Partitions = append(r.Partitions, group.CommitPartition{Topic: rt.Topic, Partition: rp.Partition,
					Offset: rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata, CommitTime: at})
				slots = append(slots, slot{ti, pi})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(r.Partitions) == 0 {
		return done(resp)
	}
	ch := rc.groups().Commit(rc.ctx, r)
	return func() kmsg.Response {
		var errs []error
		select {
		case errs = <-ch:
		case <-rc.ctx.Done():
			errs = make([]error, len(slots))
			for i := range errs {
				errs[i] = group.ErrNotAvailable
			}
		}
		for i, s := range slots {
			code := errorCode(errs[i])
			if errors.Is(errs[i], group.ErrGroupNotFound) && rc.version() < 9 {
				code = kerr.IllegalGeneration.Code
			}
			resp.Topics[s.t].Partitions[s.p].ErrorCode = code
		}
		return resp
	}
}
