package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
)

// ElectLeaders v0-v2 (v1 adds the election type and top-level error, v2
// flexible).
//
// sluice elects on its own: a partition is led by the first live broker of
// its replica list (cluster mode hands it there once that broker has been
// a member for the rebalance delay), and a leaderless partition is taken
// by a live broker within seconds. So an election here checks, and waits
// (up to the request's timeout) for what the cluster is already doing:
//
//   - PREFERRED: ELECTION_NOT_NEEDED when the first replica leads,
//     PREFERRED_LEADER_NOT_AVAILABLE when it is not a live broker, else
//     success once it leads.
//   - UNCLEAN: ELECTION_NOT_NEEDED when the partition has a leader,
//     ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live, else
//     success once one leads.
//
// A partition still waiting at the timeout answers REQUEST_TIMED_OUT. With
// no topics named (null), every partition is considered and, as in Kafka,
// only those that needed an election are listed.
func init() { register(kmsg.ElectLeaders, 0, 2, handleElectLeaders) }

// electPoll is how often a waiting election looks at the leaders again.
const electPoll = 20 * time.Millisecond

// electMaxWait bounds the wait whatever timeout the client asks for.
const electMaxWait = 60 * time.Second

type election struct {
	sp      *kmsg.ElectLeadersResponseTopicPartition
	t       log.TopicInfo
	unclean bool
}

// check answers the partition's election now: done, with sp's error code
// set, or not yet.
func (el election) check(rc *reqCtx) bool {
	b := rc.broker()
	p := el.sp.Partition
	leader, _, ok := b.Leader(el.t.Name, p)
	if !ok {
		leader = -1
	}
	replicas, _ := b.ReplicasISR(el.t, p, leader)
	anyLive := false
	for _, r := range replicas {
		if _, live := b.Node(r); live {
			anyLive = true
		}
	}
	switch {
	case el.unclean && ok:
		el.sp.ErrorCode = kerr.ElectionNotNeeded.Code
	case el.unclean && !anyLive:
		el.sp.ErrorCode = kerr.EligibleLeadersNotAvailable.Code
	case el.unclean:
		return false
	case len(replicas) == 0:
		el.sp.ErrorCode = kerr.PreferredLeaderNotAvailable.Code
	case ok && leader == replicas[0]:
		el.sp.ErrorCode = kerr.ElectionNotNeeded.Code
	default:
		if _, live := b.Node(replicas[0]); !live {
			el.sp.ErrorCode = kerr.PreferredLeaderNotAvailable.Code
		} else {
			return false
		}
	}
	return true
}

func handleElectLeaders(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.ElectLeadersRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
	unclean := req.Version >= 1 && req.ElectionType == 1
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return done(resp)
	}
	var pending []election
	if req.Topics == nil {
		// Every partition; list only those an election concerns.
		for _, t := range b.Engine().Topics() {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = t.Name
			for p := range t.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition = p
				el := election{sp: &sp, t: t, unclean: unclean}
				if el.check(rc) && sp.ErrorCode == kerr.ElectionNotNeeded.Code {
					continue
				}
				st.Partitions = append(st.Partitions, sp)
			}
			if len(st.Partitions) > 0 {
				resp.Topics = append(resp.Topics, st)
			}
		}
	} else {
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.ElectLeadersResponseTopicPartition, len(rt.Partitions))
			resp.Topics = append(resp.Topics, st)
		}
	}
	// The response's partitions are in place; elections point into them.
	for i := range resp.Topics {
		st := &resp.Topics[i]
		t, known := b.Engine().Topic(st.Topic)
		if req.Topics != nil {
			for j, p := range req.Topics[i].Partitions {
				st.Partitions[j] = kmsg.NewElectLeadersResponseTopicPartition()
				st.Partitions[j].Partition = p
			}
		}
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			if !known || sp.Partition < 0 || sp.Partition >= t.Partitions {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if el := (election{sp: sp, t: t, unclean: unclean}); !el.check(rc) {
				pending = append(pending, el)
			}
		}
	}
	if len(pending) == 0 {
		return done(resp)
	}
	wait := min(time.Duration(req.TimeoutMillis)*time.Millisecond, electMaxWait)
	return func() kmsg.Response {
		deadline := time.Now().Add(wait)
		tick := time.NewTicker(electPoll)
		defer tick.Stop()
		for len(pending) > 0 && time.Now().Before(deadline) {
			select {
			case <-tick.C:
			case <-rc.ctx.Done():
				deadline = time.Now()
				continue
			}
			left := pending[:0]
			for _, el := range pending {
				if !el.check(rc) {
					left = append(left, el)
				}
			}
			pending = left
		}
		for _, el := range pending {
			el.sp.ErrorCode = kerr.RequestTimedOut.Code
		}
		return resp
	}
}
