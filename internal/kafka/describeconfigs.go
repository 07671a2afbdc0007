package kafka

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// DescribeConfigs v0-v4, Kafka 3.9's range (KIP-896 dropped v0 in Kafka
// 4). v0 answers is_default instead of a source and has no synonyms (kmsg
// encodes only the fields of the version); v1 adds sources and synonyms, v3
// types and documentation; v4+ flexible.
// configAuth is the authorization error for op on a config resource of
// type rt (topics are checked by name, brokers as the cluster), 0 if
// allowed.
func (rc *reqCtx) configAuth(rt int8, name string, op kmsg.ACLOperation) int16 {
	switch rt {
	case resourceTopic:
		if !rc.authorized(op, kmsg.ACLResourceTypeTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	default:
		if !rc.clusterAuthorized(op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return 0
}

func init() { register(kmsg.DescribeConfigs, 0, 4, handleDescribeConfigs) }

const (
	resourceTopic        = int8(kmsg.ConfigResourceTypeTopic)
	resourceBroker       = int8(kmsg.ConfigResourceTypeBroker)
	resourceBrokerLogger = int8(kmsg.ConfigResourceTypeBrokerLogger)
)

func handleDescribeConfigs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = kmsg.ConfigResourceType(rr.ResourceType)
		sr.ResourceName = rr.ResourceName
		if code := rc.configAuth(int8(rr.ResourceType), rr.ResourceName, kmsg.ACLOperationDescribeConfigs); code != 0 {
			sr.ErrorCode = code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
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
			eff := topicconfig.Effective(b.TopicDefaultsFor(rr.ResourceName), info.Configs)
			for _, d := range topicconfig.Defs() {
				if !want(d.Name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name = d.Name
				v := eff[d.Name]
				c.Value = &v
				c.Source = kmsg.ConfigSource(configSource(b, d, info.Configs))
				c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
				c.ConfigType = kmsg.ConfigType(d.Type)
				if req.IncludeDocumentation && d.Doc != "" {
					doc := d.Doc
					c.Documentation = &doc
				}
				if req.IncludeSynonyms {
					c.ConfigSynonyms = topicSynonyms(b, d, info.Configs)
				}
				sr.Configs = append(sr.Configs, c)
			}
		case resourceBroker:
			if _, err := b.DynamicConfigs(rr.ResourceName); err != nil {
				sr.ErrorCode = errorCode(err)
				sr.ErrorMessage = errorMessage(err)
				break
			}
			for _, bc := range b.BrokerConfigs() {
				if !want(bc.Name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name = bc.Name
				v := bc.Value
				c.Value = &v
				c.ReadOnly = bc.ReadOnly
				c.Source = kmsg.ConfigSource(bc.Source)
				c.IsDefault = bc.Source == broker.SourceDefault
				c.ConfigType = kmsg.ConfigTypeString
				doc := bc.Doc
				if d, ok := topicDefaultDef(bc.Name); ok {
					c.ConfigType = kmsg.ConfigType(d.Type)
					doc = "Broker-wide default of the topic config " + d.Name + ". " + d.Doc
				}
				if bc.Type != 0 {
					c.ConfigType = kmsg.ConfigType(bc.Type)
				}
				if req.IncludeDocumentation && doc != "" {
					c.Documentation = &doc
				}
				if req.IncludeSynonyms {
					for _, l := range bc.Synonyms {
						s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
						s.Name = l.Name
						lv := l.Value
						s.Value = &lv
						s.Source = kmsg.ConfigSource(l.Source)
						c.ConfigSynonyms = append(c.ConfigSynonyms, s)
					}
				}
				sr.Configs = append(sr.Configs, c)
			}
		case resourceBrokerLogger:
			describeBrokerLoggers(rc, &sr, rr.ResourceName, want)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + strconv.Itoa(int(rr.ResourceType))
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return done(resp)
}

// describeBrokerLoggers answers a BROKER_LOGGER resource (KIP-412): the
// broker's loggers and their levels, as Kafka lists its log4j loggers.
// sluice has one logger, "root", whose level is the lowest the broker's
// log handler lets through. Like Kafka, the name must be this broker's id.
func describeBrokerLoggers(rc *reqCtx, sr *kmsg.DescribeConfigsResponseResource, name string, want func(string) bool) {
	if name == "" || name != strconv.Itoa(int(rc.broker().NodeID())) {
		sr.ErrorCode = kerr.InvalidRequest.Code
		msg := "unexpected broker id " + strconv.Quote(name) + ", expected " + strconv.Itoa(int(rc.broker().NodeID()))
		sr.ErrorMessage = &msg
		return
	}
	if !want("root") {
		return
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = "root"
	v := loggerLevel(rc.conn.srv.logger)
	c.Value = &v
	c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
	c.ConfigType = kmsg.ConfigTypeString
	sr.Configs = append(sr.Configs, c)
}

// loggerLevel is logger's level in log4j's words: the lowest slog level
// its handler enables, OFF if none.
func loggerLevel(logger *slog.Logger) string {
	if logger == nil {
		return "OFF"
	}
	for _, l := range []struct {
		level slog.Level
		name  string
	}{{slog.LevelDebug, "DEBUG"}, {slog.LevelInfo, "INFO"}, {slog.LevelWarn, "WARN"}, {slog.LevelError, "ERROR"}} {
		if logger.Handler().Enabled(context.Background(), l.level) {
			return l.name
		}
	}
	return "OFF"
}

// topicSynonyms lists the layers a topic config's value could come from,
// highest priority first, as Kafka does.
func topicSynonyms(b *broker.Broker, d topicconfig.Def, overrides map[string]string) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
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
	if d.BrokerKey == "" {
		add(d.Name, d.Default, kmsg.ConfigSourceDefaultConfig)
		return out
	}
	for _, bc := range b.BrokerConfigs() {
		if bc.Name == d.BrokerKey {
			for _, l := range bc.Synonyms {
				add(l.Name, l.Value, kmsg.ConfigSource(l.Source))
			}
		}
	}
	return out
}

// brokerKeyDef describes a dynamic broker key: the topic config it is the
// default of, or a broker-only config.
func brokerKeyDef(brokerKey string) (topicconfig.Def, bool) {
	if d, ok := topicDefaultDef(brokerKey); ok {
		return d, true
	}
	return broker.BrokerOnlyDef(brokerKey)
}

// topicDefaultDef is the topic config whose broker-wide default brokerKey
// is.
func topicDefaultDef(brokerKey string) (topicconfig.Def, bool) {
	for _, d := range topicconfig.Defs() {
		if d.BrokerKey == brokerKey {
			return d, true
		}
	}
	return topicconfig.Def{}, false
}
