package kafka

import (
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// DescribeConfigs v1-v4. v1 is the KIP-896 floor (adds sources and
// synonyms); v3 adds types and documentation; v4+ flexible.
func init() { register(kmsg.DescribeConfigs, 1, 4, handleDescribeConfigs) }

const (
	resourceTopic  = int8(kmsg.ConfigResourceTypeTopic)
	resourceBroker = int8(kmsg.ConfigResourceTypeBroker)
)

func handleDescribeConfigs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = kmsg.ConfigResourceType(rr.ResourceType)
		sr.ResourceName = rr.ResourceName
		want := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		switch int8(rr.ResourceType) {
		case resourceTopic:
			if err := broker.ValidateTopicName(rr.ResourceName); err != nil {
				sr.ErrorCode = kerr.InvalidTopicException.Code
				sr.ErrorMessage = errorMessage(err)
				break
			}
			info, ok := b.Engine().Topic(rr.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := "topic " + strconv.Quote(rr.ResourceName) + " does not exist"
				sr.ErrorMessage = &msg
				break
			}
			eff := topicconfig.Effective(b.TopicDefaults(), info.Configs)
			for _, d := range topicconfig.Defs() {
				if !want(d.Name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name = d.Name
				v := eff[d.Name]
				c.Value = &v
				c.Source = kmsg.ConfigSource(configSource(d, b.TopicDefaults(), info.Configs))
				c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
				c.ConfigType = kmsg.ConfigType(d.Type)
				if req.IncludeDocumentation && d.Doc != "" {
					doc := d.Doc
					c.Documentation = &doc
				}
				if req.IncludeSynonyms {
					c.ConfigSynonyms = topicSynonyms(d, b.TopicDefaults(), info.Configs)
				}
				sr.Configs = append(sr.Configs, c)
			}
		case resourceBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.NodeID())) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "unknown broker " + strconv.Quote(rr.ResourceName)
				sr.ErrorMessage = &msg
				break
			}
			cfgs := b.BrokerConfigs()
			names := make([]string, 0, len(cfgs))
			for k := range cfgs {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				if !want(k) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name = k
				v := cfgs[k]
				c.Value = &v
				c.ReadOnly = true
				c.Source = kmsg.ConfigSourceStaticBrokerConfig
				c.ConfigType = kmsg.ConfigTypeString
				if req.IncludeSynonyms {
					s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					s.Name = k
					s.Value = &v
					s.Source = kmsg.ConfigSourceStaticBrokerConfig
					c.ConfigSynonyms = append(c.ConfigSynonyms, s)
				}
				sr.Configs = append(sr.Configs, c)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + strconv.Itoa(int(rr.ResourceType))
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp)
}

// topicSynonyms lists the layers a topic config's value could come from,
// highest priority first, as Kafka does.
func topicSynonyms(d topicconfig.Def, brokerDefaults, overrides map[string]string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(name, v string, src kmsg.ConfigSource) {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name = name
		s.Value = &v
		s.Source = src
		out = append(out, s)
	}
	if v, ok := overrides[d.Name]; ok {
		add(d.Name, v, kmsg.ConfigSourceDynamicTopicConfig)
	}
	if v, ok := brokerDefaults[d.Name]; ok && d.BrokerKey != "" {
		add(d.BrokerKey, v, kmsg.ConfigSourceStaticBrokerConfig)
	}
	name := d.Name
	if d.BrokerKey != "" {
		name = d.BrokerKey
	}
	add(name, d.Default, kmsg.ConfigSourceDefaultConfig)
	return out
}
