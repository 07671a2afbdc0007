package compat

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDynamicBrokerConfigs: a cluster-wide message.max.bytes set through
// IncrementalAlterConfigs is reported with its dynamic source, applies to
// topics without an override, survives a restart, and a per-broker value
// takes precedence; read-only broker keys are refused.
func TestDynamicBrokerConfigs(t *testing.T) {
	b := startBroker(t)
	ctx := ctxFor(t, 60*time.Second)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	set := func(v string, brokers ...int32) {
		t.Helper()
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: &v}}, brokers...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resps {
			if r.Err != nil {
				t.Fatalf("alter %q: %v (%s)", r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	describe := func(brokers ...int32) kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx, brokers...)
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range rcs {
			if rc.Err != nil {
				t.Fatalf("describe %q: %v", rc.Name, rc.Err)
			}
			for _, c := range rc.Configs {
				if c.Key == "message.max.bytes" {
					return c
				}
			}
		}
		t.Fatal("message.max.bytes not described")
		return kadm.Config{}
	}
	produce := func(size int) error {
		cl := noCompressionClient(t, b.Addr())
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: make([]byte, size)}).FirstErr()
	}

	set("5000")
	if c := describe(); c.MaybeValue() != "5000" || c.Source.String() != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Fatalf("cluster-wide: got %q from %s", c.MaybeValue(), c.Source)
	}
	if err := produce(10000); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("10 kB record under a 5000-byte broker default: want MESSAGE_TOO_LARGE, got %v", err)
	}
	if err := produce(1000); err != nil {
		t.Fatalf("1 kB record: %v", err)
	}

	b.Restart()
	adm = newAdmin(t, b.Addr())
	if c := describe(); c.MaybeValue() != "5000" {
		t.Fatalf("after restart: got %q", c.MaybeValue())
	}
	set("20000", 1) // the default node id
	if c := describe(1); c.MaybeValue() != "20000" || c.Source.String() != "DYNAMIC_BROKER_CONFIG" {
		t.Fatalf("per-broker: got %q from %s", c.MaybeValue(), c.Source)
	}
	if err := produce(10000); err != nil {
		t.Fatalf("10 kB record under a 20000-byte per-broker value: %v", err)
	}

	v := "8"
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "node.id", Value: &v}})
	if err == nil {
		for _, r := range resps {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("read-only key: want INVALID_CONFIG, got %v", err)
	}

	// Kafka's dynamic broker configs for machinery sluice lacks (thread
	// pools, Kerberos relogin) are accepted, validated and described, as
	// librdkafka's admin tests expect of a broker.
	nine, zero := "9", "0"
	alter := func(cs ...kadm.AlterConfig) error {
		resps, err := adm.AlterBrokerConfigs(ctx, cs)
		if err == nil {
			for _, r := range resps {
				err = r.Err
			}
		}
		return err
	}
	if err := alter(kadm.AlterConfig{Name: "background.threads", Value: &nine},
		kadm.AlterConfig{Name: "num.io.threads", Value: &nine}); err != nil {
		t.Fatalf("set background.threads and num.io.threads: %v", err)
	}
	if err := alter(kadm.AlterConfig{Name: "background.threads", Value: &zero}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("background.threads=0: want INVALID_CONFIG, got %v", err)
	}
	described, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, rc := range described {
		for _, c := range rc.Configs {
			if (c.Key == "background.threads" || c.Key == "num.io.threads") && c.MaybeValue() == "9" {
				found++
			}
		}
	}
	if found != 2 {
		t.Errorf("DescribeConfigs shows %d of background.threads and num.io.threads at 9, want 2", found)
	}
	legacy := kmsg.NewPtrAlterConfigsRequest() // the non-incremental API
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType = kmsg.ConfigResourceTypeBroker
	lr.ResourceName = ""
	lc := kmsg.NewAlterConfigsRequestResourceConfig()
	lc.Name, lc.Value = "sasl.kerberos.min.time.before.relogin", kmsg.StringPtr("58000")
	lr.Configs = append(lr.Configs, lc)
	legacy.Resources = append(legacy.Resources, lr)
	lresp, err := legacy.RequestWith(ctx, testbroker.NewClient(t, b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if code := lresp.Resources[0].ErrorCode; code != 0 {
		t.Errorf("legacy AlterConfigs of sasl.kerberos.min.time.before.relogin: %v", kerr.ErrorForCode(code))
	}
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: &v}}, 7); err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") {
		// kadm sends the request for broker 7 to any broker; ours refuses it.
		t.Logf("unknown broker id: %v", err)
	}
}

func noCompressionClient(t testing.TB, addr string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(1), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestDescribeConfigsDocumentation: DescribeConfigs with
// include_documentation gives every topic and broker config a type and a
// description, as Kafka does (sarama's admin tests ask for both).
func TestDescribeConfigsDocumentation(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	br := seed(t, b.Addr())
	node := request[*kmsg.MetadataResponse](t, br, kmsg.NewPtrMetadataRequest()).Brokers[0].NodeID
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	req.IncludeSynonyms = true
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, topic}, {kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(node))}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = r.typ
		rr.ResourceName = r.name
		req.Resources = append(req.Resources, rr)
	}
	resp := request[*kmsg.DescribeConfigsResponse](t, br, req)
	if len(resp.Resources) != 2 {
		t.Fatalf("%d resources in the answer, want 2", len(resp.Resources))
	}
	for _, res := range resp.Resources {
		wantCode(t, "DescribeConfigs "+res.ResourceName, res.ErrorCode, nil)
		if len(res.Configs) < 5 {
			t.Errorf("%s: only %d configs", res.ResourceName, len(res.Configs))
		}
		for _, c := range res.Configs {
			if c.ConfigType == kmsg.ConfigTypeUnknown {
				t.Errorf("%s: config %s has no type", res.ResourceName, c.Name)
			}
			if c.Documentation == nil || *c.Documentation == "" {
				t.Errorf("%s: config %s has no documentation", res.ResourceName, c.Name)
			}
		}
	}
}

// TestCleanerBackoffConfig: log.cleaner.backoff.ms, a dynamic broker config
// that is not a topic default (sarama's functional suite alters it), is
// described with Kafka's default, altered per broker, and checked.
func TestCleanerBackoffConfig(t *testing.T) {
	b := startBroker(t)
	ctx := ctxFor(t, 60*time.Second)
	adm := newAdmin(t, b.Addr())
	const key = "log.cleaner.backoff.ms"
	describe := func() kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rcs[0].Configs {
			if c.Key == key {
				return c
			}
		}
		t.Fatalf("%s not described", key)
		return kadm.Config{}
	}
	if c := describe(); c.MaybeValue() != "15000" || c.Source.String() != "DEFAULT_CONFIG" {
		t.Fatalf("before: %q from %s, want Kafka's default 15000", c.MaybeValue(), c.Source)
	}
	alter := func(v string) error {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &v}}, 1)
		if err == nil {
			for _, r := range resps {
				err = r.Err
			}
		}
		return err
	}
	if err := alter("15001"); err != nil {
		t.Fatal(err)
	}
	if c := describe(); c.MaybeValue() != "15001" || c.Source.String() != "DYNAMIC_BROKER_CONFIG" {
		t.Fatalf("after altering: %q from %s", c.MaybeValue(), c.Source)
	}
	if err := alter("-1"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("negative backoff: want INVALID_CONFIG, got %v", err)
	}
}

// TestDescribeBrokerLoggers: DescribeConfigs on a BROKER_LOGGER resource
// (KIP-412; kafkajs exposes the type) lists the broker's logger, "root",
// at the level its log lets through (the test broker logs at debug), with
// the DYNAMIC_BROKER_LOGGER_CONFIG source; another broker's id is
// INVALID_REQUEST, as on Kafka.
func TestDescribeBrokerLoggers(t *testing.T) {
	b := startBroker(t)
	br := seed(t, b.Addr())
	describe := func(name string, names ...string) kmsg.DescribeConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBrokerLogger, name, names
		req.Resources = append(req.Resources, r)
		resp := request[*kmsg.DescribeConfigsResponse](t, br, req)
		if len(resp.Resources) != 1 {
			t.Fatalf("%d resources answered, want 1", len(resp.Resources))
		}
		return resp.Resources[0]
	}
	id := strconv.Itoa(int(b.Config().NodeID))
	res := describe(id)
	wantCode(t, "BROKER_LOGGER "+id, res.ErrorCode, nil)
	if len(res.Configs) != 1 || res.Configs[0].Name != "root" || res.Configs[0].Value == nil || *res.Configs[0].Value != "DEBUG" ||
		res.Configs[0].Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
		t.Errorf("BROKER_LOGGER %s: %+v, want root=DEBUG from DYNAMIC_BROKER_LOGGER_CONFIG", id, res.Configs)
	}
	if res := describe(id, "kafka.server"); res.ErrorCode != 0 || len(res.Configs) != 0 {
		t.Errorf("BROKER_LOGGER %s asked for kafka.server only: %+v, want no configs", id, res)
	}
	wantCode(t, "BROKER_LOGGER of broker 77", describe("77").ErrorCode, kerr.InvalidRequest)
	wantCode(t, "BROKER_LOGGER without a name", describe("").ErrorCode, kerr.InvalidRequest)
}
