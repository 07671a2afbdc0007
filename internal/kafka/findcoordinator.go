package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/txn"
)

// FindCoordinator v0-v6. v1 adds the key type, v3+ is flexible, v4+ batches
// keys (KIP-699); v6 only adds the share-group key type (KIP-932).
//
// Groups (key type 0) and transactions (key type 1) are coordinated by
// this node; the first lookup creates __consumer_offsets or
// __transaction_state, as Kafka does. Share groups (key type 2) and
// unknown types get INVALID_REQUEST.
func init() { register(kmsg.FindCoordinator, 0, 6, handleFindCoordinator) }

func handleFindCoordinator(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	b := rc.broker()
	// The coordinator of a key is the leader of the internal topic
	// partition the key maps to (Kafka's rule), found through the topology.
	locate := func(c *kmsg.FindCoordinatorResponseCoordinator, topic, key string) {
		t, ok := b.Engine().Topic(topic)
		if !ok || t.Partitions < 1 {
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return
		}
		leader, _, ok := b.Leader(topic, log.CoordinatorPartition(key, t.Partitions))
		n, live := b.Node(leader)
		if !ok || !live {
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return
		}
		c.NodeID = n.ID
		c.Host, c.Port = n.Addr(rc.conn.listener.Name)
	}

	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID = -1
		c.Port = -1
		var msg string
		switch req.CoordinatorType {
		case 0:
			if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key) {
				c.ErrorCode = kerr.GroupAuthorizationFailed.Code
				msg = "not authorized to describe group " + key
				break
			}
			if err := rc.groups().EnsureTopic(rc.ctx); err != nil {
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
				msg = err.Error()
				break
			}
			locate(&c, group.Topic, key)
		case 1:
			if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key) {
				c.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				msg = "not authorized to describe transactional id " + key
				break
			}
			if err := rc.txns().EnsureTopic(rc.ctx); err != nil {
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
				msg = err.Error()
				break
			}
			locate(&c, txn.Topic, key)
		default:
			c.ErrorCode = kerr.InvalidRequest.Code
			msg = "unsupported coordinator key type"
		}
		if c.ErrorCode != 0 && msg == "" {
			msg = "the coordinator is not available yet (its partition has no leader)"
		}
		if c.ErrorCode != 0 {
			c.ErrorMessage = &msg
		}
		return c
	}

	if rc.version() >= 4 {
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(k))
		}
		return done(resp)
	}
	c := answer(req.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
	resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	return done(resp)
}
