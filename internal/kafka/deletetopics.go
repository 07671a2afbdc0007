package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
)

// DeleteTopics v0-v6, Kafka 3.9's range (KIP-896 dropped v0 in Kafka 4; v1
// only adds the throttle time); v4+ flexible; v5+ carries an
// error message; v6 names topics by name or id. Internal topics, existing
// or not, are refused with INVALID_REQUEST (broker.RefuseInternal).
func init() { register(kmsg.DeleteTopics, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if rc.version() >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: &n})
		}
	}
	for _, t := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic = t.name
		st.TopicID = t.id
		var name string
		switch {
		case t.name != nil && *t.name != "":
			name = *t.name
			if info, ok := b.Engine().Topic(name); ok {
				st.TopicID = info.ID
			}
		case t.id != [16]byte{}:
			info, ok := b.Engine().TopicByID(t.id)
			if !ok {
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name = info.Name
			st.Topic = &info.Name
		default:
			st.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !rc.authorized(kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, name) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := b.DeleteTopic(rc.ctx, name); err != nil {
			st.ErrorCode = errorCode(err)
			if err != log.ErrUnknownTopicOrPartition {
				st.ErrorMessage = errorMessage(err)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp)
}
