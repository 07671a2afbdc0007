package registry

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// Schemas of the strategy and decode tests. shopProto has two messages
// (indexes [0] and [1]) and one nested in the second ([1, 0]).
const (
	otherAvro = `{"type":"record","name":"Other","namespace":"t","fields":[{"name":"n","type":"string"}]}`
	shopProto = `syntax = "proto3";
package shop;
message Paid { int64 id = 1; }
message Refund { string reason = 1; message Line { int32 qty = 1; } }
`
	orderJSON    = `{"title":"Order","type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`
	untitledJSON = `{"type":"object"}`
)

// wire is a payload in the Confluent wire format, as franz-go's sr
// serializers frame it: magic, id, for Protobuf the message indexes.
func wire(id int, data []byte, index ...int) []byte {
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(nil, id, index)
	if err != nil {
		panic(err)
	}
	return append(b, data...)
}

// produceErr produces values to topic in one batch and returns the first
// error.
func produceErr(ctx context.Context, cl *kgo.Client, topic string, values ...[]byte) error {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: v}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// refusal is a produce's error as the broker answered it: kgo keeps the
// code but not the message, so checks of the message produce with a raw
// ProduceRequest (rawProduce).
type refusal struct {
	code int16
	msg  string
}

func (r refusal) Error() string { return kerr.ErrorForCode(r.code).Error() + ": " + r.msg }

// rawProduce produces records (keys may be nil) to partition 0 of topic
// in one batch compressed with codec (0 none, 1 gzip, 2 snappy, 3 lz4,
// 4 zstd) and returns the partition's answer; nil when taken.
func rawProduce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, codec int8, recs ...kmsg.Record) error {
	t.Helper()
	bt, err := batch.Build(codec, time.Now().UnixMilli(), recs)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = bt
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode == 0 {
		return nil
	}
	msg := ""
	if p.ErrorMessage != nil {
		msg = *p.ErrorMessage
	}
	return refusal{p.ErrorCode, msg}
}

// values are records with these values and no key.
func values(vs ...[]byte) []kmsg.Record {
	out := make([]kmsg.Record, len(vs))
	for i, v := range vs {
		out[i].Value = v
	}
	return out
}

func wantInvalid(t *testing.T, what string, err error, msg ...string) {
	t.Helper()
	var ke *kerr.Error
	var r refusal
	switch {
	case errors.As(err, &r) && r.code == kerr.InvalidRecord.Code:
	case errors.As(err, &ke) && ke.Code == kerr.InvalidRecord.Code && len(msg) == 0:
	default:
		t.Fatalf("%s: %v, want INVALID_RECORD", what, err)
	}
	for _, m := range msg {
		if !strings.Contains(r.msg, m) {
			t.Fatalf("%s: %q does not say %q", what, r.msg, m)
		}
	}
}

func register(t *testing.T, ctx context.Context, reg *sr.Client, subject, text string, typ sr.SchemaType) int {
	t.Helper()
	ss, err := reg.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: typ})
	if err != nil {
		t.Fatalf("registering under %s: %v", subject, err)
	}
	return ss.ID
}

// TestSubjectNameStrategies: with RecordNameStrategy a record's schema id
// must be registered under the schema's record name (Avro: namespace.name;
// Protobuf: the full name of the message its indexes name; JSON Schema:
// its title), with TopicRecordNameStrategy under <topic>-<record name>,
// with TopicNameStrategy (the default) under <topic>-value; keys likewise.
func TestSubjectNameStrategies(t *testing.T) {
	b := testbroker.Start(t)
	const prefix = "io.confluent.kafka.serializers.subject."
	testbroker.CreateTopic(t, b.Addr(), "byrecord", 1, map[string]string{"sluice.value.schema.validation": "true",
		"sluice.value.subject.name.strategy": prefix + "RecordNameStrategy"})
	testbroker.CreateTopic(t, b.Addr(), "bytopicrecord", 1, map[string]string{"sluice.value.schema.validation": "true",
		"sluice.value.subject.name.strategy": "TopicRecordNameStrategy"})
	testbroker.CreateTopic(t, b.Addr(), "bytopic", 1, map[string]string{"sluice.value.schema.validation": "true",
		"sluice.value.subject.name.strategy": prefix + "TopicNameStrategy"})
	testbroker.CreateTopic(t, b.Addr(), "keys", 1, map[string]string{"sluice.key.schema.validation": "true",
		"sluice.key.subject.name.strategy": "RecordNameStrategy"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg := srClient(t, b.RegistryAddr())

	// Avro: User is registered under its record name, under
	// bytopicrecord-t.User and under bytopic-value (one id); Other only
	// somewhere else at first.
	user := register(t, ctx, reg, "t.User", userV1, sr.TypeAvro)
	register(t, ctx, reg, "bytopicrecord-t.User", userV1, sr.TypeAvro)
	register(t, ctx, reg, "bytopic-value", userV1, sr.TypeAvro)
	other := register(t, ctx, reg, "elsewhere-value", otherAvro, sr.TypeAvro)
	var serde sr.Serde
	serde.Register(user, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(avro.MustParse(userV1), v) }))
	userVal, err := serde.Encode(map[string]any{"id": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	otherVal := wire(other, []byte{2, 'x'})

	cl := b.Client(t, kgo.RecordRetries(1))
	for _, topic := range []string{"byrecord", "bytopicrecord", "bytopic"} {
		if err := produceErr(ctx, cl, topic, userVal); err != nil {
			t.Fatalf("%s: t.User refused: %v", topic, err)
		}
	}
	wantInvalid(t, "byrecord, Other not under t.Other", rawProduce(ctx, t, cl, "byrecord", 0, values(otherVal)...),
		"record 0", "not registered under subject t.Other (RecordNameStrategy)")
	register(t, ctx, reg, "t.Other", otherAvro, sr.TypeAvro)
	if err := produceErr(ctx, cl, "byrecord", otherVal); err != nil {
		t.Fatalf("byrecord: Other refused once under t.Other: %v", err)
	}
	wantInvalid(t, "bytopicrecord, Other", rawProduce(ctx, t, cl, "bytopicrecord", 0, values(otherVal)...), "bytopicrecord-t.Other (TopicRecordNameStrategy)")
	wantInvalid(t, "bytopic, Other", rawProduce(ctx, t, cl, "bytopic", 0, values(otherVal)...), "bytopic-value")

	// Protobuf: the message indexes pick the record name.
	pb := register(t, ctx, reg, "shop.Refund", shopProto, sr.TypeProtobuf)
	reason := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "late")
	if err := produceErr(ctx, cl, "byrecord", wire(pb, reason, 1)); err != nil {
		t.Fatalf("byrecord: shop.Refund (index [1]) refused: %v", err)
	}
	wantInvalid(t, "index [0] is shop.Paid", rawProduce(ctx, t, cl, "byrecord", 0, values(wire(pb, nil, 0))...), "not registered under subject shop.Paid")
	wantInvalid(t, "index [1 0] is shop.Refund.Line", rawProduce(ctx, t, cl, "byrecord", 0, values(wire(pb, nil, 1, 0))...), "shop.Refund.Line")
	wantInvalid(t, "index [5]", rawProduce(ctx, t, cl, "byrecord", 0, values(wire(pb, nil, 5))...), "name no message")

	// JSON Schema: the title; a schema without one gives no subject.
	js := register(t, ctx, reg, "Order", orderJSON, sr.TypeJSON)
	if err := rawProduce(ctx, t, cl, "byrecord", 0, values(wire(js, []byte(`{"id":1}`)))...); err != nil {
		t.Fatalf("byrecord: JSON titled Order refused: %v", err)
	}
	untitled := register(t, ctx, reg, "untitled-value", untitledJSON, sr.TypeJSON)
	wantInvalid(t, "untitled JSON", rawProduce(ctx, t, cl, "byrecord", 0, values(wire(untitled, []byte(`{}`)))...), "no record name")

	// Keys: the key strategy applies to keys only; values pass.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "keys", Key: userVal, Value: []byte("free")}).FirstErr(); err != nil {
		t.Fatalf("keys: t.User key refused: %v", err)
	}
	err = rawProduce(ctx, t, cl, "keys", 0, kmsg.Record{Key: wire(untitled, nil), Value: userVal})
	wantInvalid(t, "keys: untitled key", err, "the key")

	// Nothing refused was kept.
	for topic, want := range map[string]int{"byrecord": 4, "bytopicrecord": 1, "bytopic": 1, "keys": 1} {
		if n := len(testbroker.ReadAll(t, b.Addr(), topic)[0]); n != want {
			t.Errorf("%s holds %d records, want %d", topic, n, want)
		}
	}
}

// TestStrategyConfigRefused: a subject name strategy that is not one of
// Confluent's three is INVALID_CONFIG with a message listing them, from
// CreateTopics, AlterConfigs and IncrementalAlterConfigs.
func TestStrategyConfigRefused(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "s", 1, nil)
	adm := kadm.NewClient(b.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := "com.example.MyStrategy"
	res, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"sluice.value.subject.name.strategy": &bad}, "t")
	if !errors.Is(res.Err, kerr.InvalidConfig) || !strings.Contains(res.ErrMessage, "TopicRecordNameStrategy") {
		t.Fatalf("CreateTopics: %v %q, want INVALID_CONFIG listing the strategies", res.Err, res.ErrMessage)
	}
	for _, key := range []string{"sluice.value.subject.name.strategy", "sluice.key.subject.name.strategy"} {
		rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: key, Value: &bad}}, "s")
		if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
			t.Fatalf("AlterConfigs %s: %v %+v, want INVALID_CONFIG", key, err, rs)
		}
		rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &bad}}, "s")
		if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
			t.Fatalf("IncrementalAlterConfigs %s: %v %+v, want INVALID_CONFIG", key, err, rs)
		}
		good := "TopicRecordNameStrategy"
		rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &good}}, "s")
		if err != nil || len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs %s=%s: %v %+v", key, good, err, rs)
		}
	}
}

// TestDecodeCheck: with sluice.value.schema.validation.decode=true the
// data after the wire header must decode with the schema its id names
// (Avro, Protobuf, JSON Schema); compressed batches are checked too; a
// batch with one bad record among good ones is refused whole, with the
// bad record named, and nothing of it is kept.
func TestDecodeCheck(t *testing.T) {
	b := testbroker.Start(t)
	on := map[string]string{"sluice.value.schema.validation.decode": "true"}
	for _, topic := range []string{"avro", "proto", "json"} {
		testbroker.CreateTopic(t, b.Addr(), topic, 1, on)
	}
	testbroker.CreateTopic(t, b.Addr(), "idonly", 1, map[string]string{"sluice.value.schema.validation": "true"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg := srClient(t, b.RegistryAddr())
	av := register(t, ctx, reg, "avro-value", userV1, sr.TypeAvro)
	register(t, ctx, reg, "idonly-value", userV1, sr.TypeAvro)
	pb := register(t, ctx, reg, "proto-value", shopProto, sr.TypeProtobuf)
	js := register(t, ctx, reg, "json-value", orderJSON, sr.TypeJSON)

	var serde sr.Serde
	serde.Register(av, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(avro.MustParse(userV1), v) }))
	goodAvro, err := serde.Encode(map[string]any{"id": int64(1) << 40})
	if err != nil {
		t.Fatal(err)
	}
	paid := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 42)
	line := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3)
	good := map[string][][]byte{
		"avro":  {goodAvro, wire(av, []byte{0})}, // id 0 is one zigzag byte
		"proto": {wire(pb, paid, 0), wire(pb, nil, 0), wire(pb, line, 1, 0)},
		"json":  {wire(js, []byte(`{"id": 7, "extra": [1, 2]}`))},
	}
	bad := map[string]map[string][]byte{
		"avro": {
			"truncated":      goodAvro[:len(goodAvro)-1],
			"trailing bytes": append(append([]byte(nil), goodAvro...), 1),
			"no data":        wire(av, nil),
		},
		"proto": {
			"truncated":      wire(pb, paid[:1], 0),
			"wrong type":     wire(pb, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x"), 0),
			"unknown field":  wire(pb, protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1), 0),
			"nested unknown": wire(pb, protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1), 1, 0),
		},
		"json": {
			"not JSON":         wire(js, []byte(`{"id": `)),
			"fails the schema": wire(js, []byte(`{"id": "seven"}`)),
			"missing id":       wire(js, []byte(`{}`)),
			"two values":       wire(js, []byte(`{"id":1} {"id":2}`)),
		},
	}
	cl := b.Client(t, kgo.RecordRetries(1))
	kept := map[string]int{}
	for topic, vs := range good {
		for codec := int8(0); codec <= 4; codec++ {
			if err := rawProduce(ctx, t, cl, topic, codec, values(vs...)...); err != nil {
				t.Fatalf("%s, codec %d: good records refused: %v", topic, codec, err)
			}
			kept[topic] += len(vs)
		}
		for name, v := range bad[topic] {
			for _, codec := range []int8{0, 4} {
				// The bad record third among good ones: the batch is refused
				// whole and the message names record 2.
				recs := values(append(append(append([][]byte{}, vs[0], vs[0]), v), vs...)...)
				wantInvalid(t, topic+" "+name, rawProduce(ctx, t, cl, topic, codec, recs...), "record 2 of the batch", "the value")
			}
		}
	}
	// The id-only check takes what does not decode: it reads the header only.
	if err := rawProduce(ctx, t, cl, "idonly", 1, values(bad["avro"]["no data"], bad["avro"]["truncated"])...); err != nil {
		t.Fatalf("idonly: %v", err)
	}
	// A franz-go producer with compression: good records in, bad refused.
	zcl := b.Client(t, kgo.RecordRetries(1), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	if err := produceErr(ctx, zcl, "avro", goodAvro, goodAvro, goodAvro); err != nil {
		t.Fatalf("gzip producer: %v", err)
	}
	kept["avro"] += 3
	wantInvalid(t, "gzip producer, truncated", produceErr(ctx, zcl, "avro", bad["avro"]["truncated"]))
	for topic, want := range kept {
		if n := len(testbroker.ReadAll(t, b.Addr(), topic)[0]); n != want {
			t.Errorf("%s holds %d records, want %d", topic, n, want)
		}
	}
}

// TestConfluentPythonStrategies: librdkafka producers (confluent-kafka-
// python) into topics checking under each strategy, with subjects named
// by confluent-kafka-python's own strategy functions: a registered id is
// taken, a stray id, data failing the JSON Schema (decode check on) and
// bytes outside the wire format are refused with INVALID_RECORD.
func TestConfluentPythonStrategies(t *testing.T) {
	testbroker.NeedPythonModule(t, "requests", "python3-requests")
	testbroker.NeedPythonModule(t, "confluent_kafka.schema_registry", "python3-confluent-kafka")
	b := testbroker.Start(t)
	for topic, strategy := range map[string]string{"py-topic": "TopicNameStrategy", "py-record": "RecordNameStrategy",
		"py-topicrecord": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"} {
		testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"sluice.value.schema.validation.decode": "true",
			"sluice.value.subject.name.strategy": strategy})
	}
	out := testbroker.RunTool(t, nil, 2*time.Minute, testbroker.Python, "testdata/strategies.py", "http://"+b.RegistryAddr(), b.Addr())
	var got map[string]int
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the script's output %q: %v", out, err)
	}
	invalid := int(kerr.InvalidRecord.Code)
	for _, topic := range []string{"py-topic", "py-record", "py-topicrecord"} {
		for c, want := range map[string]int{"good": 0, "stray": invalid, "bad json": invalid, "plain": invalid} {
			if got[topic+" "+c] != want {
				t.Errorf("%s, %s: delivery code %d, want %d", topic, c, got[topic+" "+c], want)
			}
		}
	}
	for _, topic := range []string{"py-topic", "py-record", "py-topicrecord"} {
		if n := len(testbroker.ReadAll(t, b.Addr(), topic)[0]); n != 1 {
			t.Errorf("%s holds %d records, want 1", topic, n)
		}
	}
}

// TestValidationHostileBatches: a compressed batch that decompresses past
// its limit, or does not decompress, is refused on a validating topic with
// the log's own error, not followed into unbounded memory.
func TestValidationHostileBatches(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "v", 1, map[string]string{"sluice.value.schema.validation.decode": "true", "max.message.bytes": "100000"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := b.Client(t)
	zeros := make([]byte, 9<<20) // more than the 8 MiB decompressed limit; a few KiB compressed
	err := rawProduce(ctx, t, cl, "v", 4, values(zeros)...)
	var r refusal
	if !errors.As(err, &r) || r.code != kerr.MessageTooLarge.Code {
		t.Fatalf("a zstd bomb: %v, want MESSAGE_TOO_LARGE", err)
	}
	bt, err := batch.Build(1, time.Now().UnixMilli(), values([]byte("abc"), []byte("def")))
	if err != nil {
		t.Fatal(err)
	}
	bt[batch.HeaderSize] ^= 0xff // the gzip stream's magic
	binary.BigEndian.PutUint32(bt[batch.OffCRC:], batch.ComputeCRC(bt))
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "v"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = bt
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.CorruptMessage.Code {
		t.Fatalf("a gzip batch that does not decompress: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(c))
	}
	if n := len(testbroker.ReadAll(t, b.Addr(), "v")); n != 0 && len(testbroker.ReadAll(t, b.Addr(), "v")[0]) != 0 {
		t.Fatal("a refused batch was kept")
	}
}
