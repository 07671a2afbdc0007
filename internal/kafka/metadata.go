package kafka

import (
	"context"

	"github.com/sluice-mq/sluice/internal/acl"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Metadata v0-v13. v4+ carries allow_auto_topic_creation (before v4 topics
// are always auto-created when the broker allows it); v10+ topic ids; v12
// lets a topic be named by id only; v13 adds a top-level error code
// (KIP-1102), which only asks a client to rebootstrap and is always 0
// here. The request that auto-creates a topic gets LEADER_NOT_AVAILABLE
// for it, as from Kafka; the next finds it. Internal topics are created by
// their coordinators (ensureInternalTopic), never as ordinary topics.
func init() { register(kmsg.Metadata, 0, 13, handleMetadata) }

func handleMetadata(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	for _, n := range b.Nodes() {
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID = n.ID
		rb.Host, rb.Port = n.Addr(rc.conn.listener.Name)
		if n.Rack != "" {
			rack := n.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	cid := b.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = b.ControllerID()

	addTopic := func(t log.TopicInfo) {
		mt := kmsg.NewMetadataResponseTopic()
		name := t.Name
		mt.Topic = &name
		mt.TopicID = t.ID
		mt.IsInternal = t.Internal
		for p := int32(0); p < t.Partitions; p++ {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = p
			pl := leadership(b, t, p)
			if !pl.ok {
				// Failover in progress: clients retry after a backoff.
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR = pl.leader, pl.epoch, pl.replicas, pl.isr
			mt.Partitions = append(mt.Partitions, mp)
		}
		mt.AuthorizedOperations = rc.authorizedOps(req.IncludeTopicAuthorizedOperations, topicOperations, kmsg.ACLResourceTypeTopic, t.Name)
		resp.Topics = append(resp.Topics, mt)
	}
	addErr := func(name *string, id [16]byte, err error) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = name
		mt.TopicID = id
		mt.ErrorCode = errorCode(err)
		resp.Topics = append(resp.Topics, mt)
	}

	if req.Topics == nil || (rc.version() == 0 && len(req.Topics) == 0) {
		// All topics (v0 uses an empty list to mean all).
		// Topics the client may not describe are left out.
		for _, t := range b.Engine().Topics() {
			if rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
				addTopic(t)
			}
		}
	} else {
		allow := req.AllowAutoTopicCreation || rc.version() < 4
		mayCreate := rc.clusterAuthorized(kmsg.ACLOperationCreate)
		for _, rt := range req.Topics {
			if rt.Topic == nil || *rt.Topic == "" {
				if rt.TopicID == ([16]byte{}) {
					addErr(rt.Topic, rt.TopicID, log.ErrUnknownTopicOrPartition)
					continue
				}
				t, ok := b.Engine().TopicByID(rt.TopicID)
				if !ok {
					mt := kmsg.NewMetadataResponseTopic()
					mt.TopicID = rt.TopicID
					mt.ErrorCode = kerr.UnknownTopicID.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
					addErr(nil, rt.TopicID, errTopicAuthorization)
					continue
				}
				addTopic(t)
				continue
			}
			if !rc.authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, *rt.Topic) {
				addErr(rt.Topic, [16]byte{}, errTopicAuthorization)
				continue
			}
			// Auto-creation needs CREATE on the cluster or the topic.
			create := allow && (mayCreate || rc.authorized(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, *rt.Topic))
			if created, err := rc.ensureInternalTopic(*rt.Topic, create && b.AutoCreate()); created || err != nil {
				if err != nil {
					addErr(rt.Topic, [16]byte{}, err)
					continue
				}
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
				mt.IsInternal = true
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			t, created, err := b.TopicForMetadata(rc.ctx, *rt.Topic, create)
			switch {
			case err != nil:
				addErr(rt.Topic, [16]byte{}, err)
			case created:
				// As Kafka answers the request that triggers the
				// creation: LEADER_NOT_AVAILABLE, no partitions yet.
				// Clients retry, and the next request finds it.
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
				resp.Topics = append(resp.Topics, mt)
			default:
				addTopic(t)
			}
		}
	}
	resp.AuthorizedOperations = rc.authorizedOps(req.IncludeClusterAuthorizedOperations, clusterOperations, kmsg.ACLResourceTypeCluster, acl.ClusterName)
	return done(resp)
}

// ensureInternalTopic, when create (the request may auto-create topics),
// has the coordinator of a missing __consumer_offsets or
// __transaction_state create it, with its configured partition count and
// configs, as Kafka's auto-creation does for internal topics. created
// reports that the topic did not exist before. Other names, and internal
// topics that exist or may not be created, are left to TopicForMetadata,
// which never creates an internal topic as an ordinary one.
func (rc *reqCtx) ensureInternalTopic(name string, create bool) (created bool, err error) {
	if !create {
		return false, nil
	}
	var ensure func(context.Context) error
	switch name {
	case group.Topic:
		ensure = rc.groups().EnsureTopic
	case txn.Topic:
		ensure = rc.txns().EnsureTopic
	default:
		return false, nil
	}
	if _, ok := rc.broker().Engine().Topic(name); ok {
		return false, nil
	}
	return true, ensure(rc.ctx)
}

// partitionLeadership is what Metadata and DescribeTopicPartitions report
// of a partition's leader and replicas.
type partitionLeadership struct {
	leader, epoch int32
	replicas, isr []int32
	ok            bool // false while failing over: no leader, epoch -1, empty ISR
}

func leadership(b *broker.Broker, t log.TopicInfo, p int32) partitionLeadership {
	leader, epoch, ok := b.Leader(t.Name, p)
	if !ok {
		leader, epoch = -1, -1
	}
	pl := partitionLeadership{leader: leader, epoch: epoch, ok: ok}
	pl.replicas, pl.isr = b.ReplicasISR(t, p, leader)
	if !ok {
		pl.isr = []int32{}
	}
	return pl
}
