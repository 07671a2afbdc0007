package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Leader discovery (KIP-951): a NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH answer to Produce v10+ or Fetch v16+ names the
// partition's current leader and epoch, and the response lists that
// broker's endpoint, so the client moves at once instead of first
// refreshing its metadata.

func needsLeaderHint(code int16) bool {
	return code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code
}

// hint fills one partition's current leader and epoch when its error
// code calls for it and the leader is known, and records the leader in ids.
func (rc *reqCtx) hint(ids map[int32]bool, topic string, partition int32, code int16, leaderID, leaderEpoch *int32) {
	if !needsLeaderHint(code) || topic == "" {
		return
	}
	if id, epoch, ok := rc.broker().Leader(topic, partition); ok {
		*leaderID, *leaderEpoch = id, epoch
		ids[id] = true
	}
}

// hintNodes returns the endpoints of the leader ids named, in id order.
func (rc *reqCtx) hintNodes(ids map[int32]bool) []kmsg.FetchResponseBroker {
	var out []kmsg.FetchResponseBroker
	for _, n := range rc.broker().Nodes() {
		if !ids[n.ID] {
			continue
		}
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port = n.ID, n.Host, n.Port
		if n.Rack != "" {
			rack := n.Rack
			b.Rack = &rack
		}
		out = append(out, b)
	}
	return out
}

func addProduceLeaderHints(rc *reqCtx, resp *kmsg.ProduceResponse) {
	if rc.version() < 10 {
		return
	}
	ids := map[int32]bool{}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rc.hint(ids, t.Topic, p.Partition, p.ErrorCode, &p.CurrentLeader.LeaderID, &p.CurrentLeader.LeaderEpoch)
		}
	}
	for _, n := range rc.hintNodes(ids) {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: n.NodeID, Host: n.Host, Port: n.Port, Rack: n.Rack})
	}
}

// addFetchLeaderHints fills the hints of a fetch answer; names maps each
// response topic (by index) to its name, which v13+ answers carry only as
// an id.
func addFetchLeaderHints(rc *reqCtx, resp *kmsg.FetchResponse, names []string) {
	if rc.version() < 16 {
		return
	}
	ids := map[int32]bool{}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rc.hint(ids, names[ti], p.Partition, p.ErrorCode, &p.CurrentLeader.LeaderID, &p.CurrentLeader.LeaderEpoch)
		}
	}
	resp.Brokers = append(resp.Brokers, rc.hintNodes(ids)...)
}
