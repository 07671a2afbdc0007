package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// CreateTopics v0-v7, Kafka 3.9's range (KIP-896 dropped v0-v1 in Kafka 4).
// v1 adds validate_only and error messages (kmsg leaves them false and
// unsent for v0); v5+ flexible and returns the
// created topic's configs; v7 returns the topic id. Internal topics are
// refused with INVALID_REQUEST, validate-only too (broker.RefuseInternal):
// the broker creates them itself.
func init() { register(kmsg.CreateTopics, 0, 7, handleCreateTopics) }

func handleCreateTopics(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	mayCreate := rc.clusterAuthorized(kmsg.ACLOperationCreate)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions = -1
		st.ReplicationFactor = -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
		}
		if seen[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic %q appears more than once in the request", rt.Topic))
			continue
		}
		if !mayCreate && !rc.authorized(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, rt.Topic) {
			fail(kerr.TopicAuthorizationFailed.Code, "not authorized to create topic "+rt.Topic)
			continue
		}
		configs := map[string]string{}
		bad := ""
		for _, c := range rt.Configs {
			if c.Value == nil {
				bad = fmt.Sprintf("null value for config %q is not supported", c.Name)
				break
			}
			configs[c.Name] = *c.Value
		}
		if bad != "" {
			fail(kerr.InvalidConfig.Code, bad)
			continue
		}
		var assignments [][]int32
		if len(rt.ReplicaAssignment) > 0 {
			// Kafka wants partitions numbered 0..n-1, each once.
			assignments = make([][]int32, len(rt.ReplicaAssignment))
			for _, a := range rt.ReplicaAssignment {
				if a.Partition < 0 || int(a.Partition) >= len(assignments) || assignments[a.Partition] != nil {
					bad = fmt.Sprintf("replica assignment partitions must be numbered 0 to %d, each once; got %d", len(assignments)-1, a.Partition)
					break
				}
				assignments[a.Partition] = append([]int32{}, a.Replicas...)
			}
			if bad != "" {
				fail(kerr.InvalidReplicaAssignment.Code, bad)
				continue
			}
		}
		info, err := b.CreateTopic(rc.ctx, broker.CreateTopicRequest{
			Name:              rt.Topic,
			Partitions:        rt.NumPartitions,
			ReplicationFactor: rt.ReplicationFactor,
			Assignments:       assignments,
			Configs:           configs,
			ValidateOnly:      req.ValidateOnly,
		})
		if err != nil {
			fail(errorCode(err), err.Error())
			continue
		}
		st.TopicID = info.ID
		st.NumPartitions = info.Partitions
		st.ReplicationFactor = info.ReplicationFactor
		if rc.version() >= 5 {
			eff := topicconfig.Effective(b.TopicDefaultsFor(rt.Topic), configs)
			for _, d := range topicconfig.Defs() {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = d.Name
				v := eff[d.Name]
				c.Value = &v
				c.Source = configSource(b, d, configs)
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}

// configSource reports where a topic config's value comes from, with
// Kafka's ConfigSource numbering.
func configSource(b *broker.Broker, d topicconfig.Def, overrides map[string]string) int8 {
	if _, ok := overrides[d.Name]; ok {
		return int8(kmsg.ConfigSourceDynamicTopicConfig)
	}
	return int8(b.TopicDefaultSource(d.Name))
}
