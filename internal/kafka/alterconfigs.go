package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// AlterConfigs v0-v2 (v2+ flexible): replaces a resource's whole set of
// overrides, as Kafka's non-incremental API does.
func init() { register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterConfigsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		set := map[string]string{}
		for _, c := range rr.Configs {
			if c.Value == nil {
				continue // null means "remove the override", which replacing does
			}
			set[c.Name] = *c.Value
		}
		code, err := rc.configAuth(int8(rr.ResourceType), rr.ResourceName, kmsg.ACLOperationAlterConfigs), error(nil)
		if code == 0 {
			code, err = alterTopicConfigs(rc, b, int8(rr.ResourceType), rr.ResourceName, set, req.ValidateOnly)
		}
		sr.ErrorCode = code
		sr.ErrorMessage = errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp)
}

// alterTopicConfigs makes overrides the resource's complete override set:
// a topic's configs, or a broker's dynamic configs.
func alterTopicConfigs(rc *reqCtx, b *broker.Broker, rtype int8, name string, overrides map[string]string, validateOnly bool) (int16, error) {
	switch rtype {
	case resourceTopic:
	case resourceBroker:
		if err := b.SetDynamicConfigs(rc.ctx, name, overrides, validateOnly); err != nil {
			return errorCode(err), err
		}
		return 0, nil
	default:
		return kerr.InvalidRequest.Code, fmt.Errorf("unsupported resource type %d", rtype)
	}
	if err := broker.ValidateTopicName(name); err != nil {
		return errorCode(err), err
	}
	if _, ok := b.Engine().Topic(name); !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Errorf("topic %q does not exist", name)
	}
	if err := topicconfig.Validate(overrides); err != nil {
		return errorCode(err), err
	}
	if validateOnly {
		return 0, nil
	}
	if err := b.Engine().AlterTopicConfigs(rc.ctx, name, overrides, nil, true); err != nil {
		return errorCode(err), err
	}
	return 0, nil
}
