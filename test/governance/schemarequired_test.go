package governance_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestSchemaRequired: with governance.schema_required, a topic whose name
// matches validates its values by default however it was created
// (CreateTopics, auto-creation by a producer, the admin API): plain bytes
// are refused with INVALID_RECORD and a registered schema id is taken.
// An explicit sluice.value.schema.validation=false turns it off for one
// topic; other topics take anything. DescribeConfigs reports the default
// as it applies to each topic.
func TestSchemaRequired(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Governance.SchemaRequired = []string{`^payments\.`, `^audit$`}
		c.AutoCreateTopics = true
	}))
	cl := b.Client(t, kgo.RecordRetries(3), kgo.AllowAutoTopicCreation())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "payments.created"); err != nil {
		t.Fatal(err)
	}
	off := "false"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"sluice.value.schema.validation": &off}, "payments.scratch"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+b.AdminAddr()+"/v1/topics", "application/json", bytes.NewReader([]byte(`{"name": "audit", "partitions": 1}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("admin API creating audit: %s", resp.Status)
	}

	// DescribeConfigs reports the default as it applies to each topic.
	rc, err := adm.DescribeTopicConfigs(ctx, "payments.created", "payments.scratch", "orders", "audit")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"payments.created": "true", "audit": "true", "payments.scratch": "false", "orders": "false"} {
		if c, err := rc.On(topic, nil); err != nil || !describes(c.Configs, "sluice.value.schema.validation", want) {
			t.Errorf("DescribeConfigs of %s: %v, sluice.value.schema.validation not %s", topic, err, want)
		}
	}

	reg, err := sr.NewClient(sr.URLs("http://" + b.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"record","name":"Paid","fields":[{"name":"id","type":"long"}]}`
	produce := func(topic string, value []byte) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr()
	}
	refused := func(topic string) {
		t.Helper()
		if err := produce(topic, []byte("plain")); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("%s took a record without a schema: %v", topic, err)
		}
		ss, err := reg.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if err := produce(topic, append(binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID)), 2)); err != nil {
			t.Fatalf("%s refused a registered schema id: %v", topic, err)
		}
	}
	refused("payments.created")
	refused("audit")
	// Auto-created by this produce, then refused by the same rule.
	if err := produce("payments.auto", []byte("plain")); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("payments.auto (auto-created) took a record without a schema: %v", err)
	}
	refused("payments.auto")
	for _, topic := range []string{"payments.scratch", "orders"} {
		if err := produce(topic, []byte("plain")); err != nil {
			t.Fatalf("%s refused a record: %v", topic, err)
		}
	}
	// Each topic holds what was taken and nothing refused.
	for topic, want := range map[string]int{"payments.created": 1, "audit": 1, "payments.auto": 1, "payments.scratch": 1, "orders": 1} {
		if n := len(testbroker.ReadAll(t, b.Addr(), topic)[0]); n != want {
			t.Errorf("%s holds %d records, want %d", topic, n, want)
		}
	}
}

// TestBrokerDefaultValidation: a broker-level topic default
// (topic_defaults) of sluice.value.schema.validation=true validates every
// topic without an override, as DescribeConfigs reports it; an override of
// false does not.
func TestBrokerDefaultValidation(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithTopicDefaults(map[string]string{"sluice.value.schema.validation": "true"}))
	cl := b.Client(t, kgo.RecordRetries(3))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	off := "false"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "checked"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"sluice.value.schema.validation": &off}, "free"); err != nil {
		t.Fatal(err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "checked")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("checked", nil); err != nil || !describes(c.Configs, "sluice.value.schema.validation", "true") {
		t.Fatalf("DescribeConfigs of checked: %v %+v", err, c)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "checked", Value: []byte("plain")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("checked took a record without a schema: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "free", Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatalf("free refused a record: %v", err)
	}
}

func describes(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name {
			return c.Value != nil && *c.Value == value
		}
	}
	return false
}
