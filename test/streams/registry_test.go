package streams_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

type avroOrder struct {
	ID     string `avro:"id" json:"id"`
	Amount int64  `avro:"amount" json:"amount"`
}

type avroOrderV2 struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
	Note   string `avro:"note"`
}

const (
	orderV1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`
	// v2 adds a field with a default: backward compatible.
	orderV2   = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"note","type":"string","default":""}]}`
	doubledJS = `{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer","minimum":0}},"required":["id","amount"]}`
)

// TestRegistrySerdesThroughBroker runs an App whose input is Avro and
// whose output is JSON Schema, both through the broker's schema registry.
// Orders are written with two versions of the Avro schema; the App reads
// both with v1 (schema resolution). The output carries the registry's wire
// format and its id; a value the JSON schema refuses fails to encode.
func TestRegistrySerdesThroughBroker(t *testing.T) {
	b := testbroker.Start(t)
	reg, err := streams.NewRegistry("http://" + b.RegistryAddr())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"avro-orders", "doubled"} {
		testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	}
	v1, err := streams.Avro[avroOrder](reg, "avro-orders-value", orderV1)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := streams.Avro[avroOrderV2](reg, "avro-orders-value", orderV2)
	if err != nil {
		t.Fatal(err)
	}
	out, err := streams.JSONSchema[avroOrder](reg, "doubled-value", doubledJS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Encode(avroOrder{ID: "x", Amount: -1}); !errors.Is(err, streams.ErrSchema) {
		t.Fatalf("encoding a negative amount: %v, want ErrSchema", err)
	}

	var rs []*kgo.Record
	var want []string
	for i := range 40 {
		var val []byte
		if i%2 == 0 {
			val, err = v1.Encode(avroOrder{ID: fmt.Sprint(i), Amount: int64(i)})
		} else {
			val, err = v2.Encode(avroOrderV2{ID: fmt.Sprint(i), Amount: int64(i), Note: "v2"})
		}
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, &kgo.Record{Topic: "avro-orders", Key: fmt.Appendf(nil, "o%d", i), Value: val})
		want = append(want, fmt.Sprintf("o%d=%d:%d", i, i, 2*i))
	}
	cl := testbroker.NewClient(t, b.Addr())
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	bld := streams.NewBuilder()
	streams.MapValues(streams.Stream(bld, "avro-orders", streams.String(), v1), func(_ string, o avroOrder) avroOrder {
		o.Amount *= 2
		return o
	}).To("doubled", streams.String(), out)
	topo, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	runApp(t, b.Addr(), "registry", "0", filepath.Join(t.TempDir(), "state"), topo)
	waitCommitted(t, b.Addr(), "registry", "avro-orders")

	src, err := sr.NewClient(sr.URLs("http://" + b.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	registered, err := src.SchemaByVersion(context.Background(), "doubled-value", -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rs := range testbroker.ReadAll(t, b.Addr(), "doubled", kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range rs {
			if r.Attrs.IsControl() {
				continue
			}
			if len(r.Value) < 5 || r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != registered.ID {
				t.Fatalf("output %q does not start with the wire header of schema id %d", r.Value, registered.ID)
			}
			o, err := out.Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s=%s:%d", r.Key, o.ID, o.Amount))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("doubled:\n got %v\nwant %v", got, want)
	}
	if _, err := v1.Decode([]byte("not the wire format")); !errors.Is(err, streams.ErrSchema) {
		t.Errorf("decoding garbage: %v, want ErrSchema", err)
	}
}

const paymentProto = `syntax = "proto3";
package shop;
message Other { string x = 1; }
message Payment {
  string id = 1;
  int64 cents = 2;
}
`

// TestProtobufSerdeThroughRegistry encodes a message (the second of its
// file: message index [1]) through the broker's registry and decodes it;
// the registry holds the schema under the subject, and a record with
// another message's index is refused.
func TestProtobufSerdeThroughRegistry(t *testing.T) {
	b := testbroker.Start(t)
	reg, err := streams.NewRegistry("http://" + b.RegistryAddr())
	if err != nil {
		t.Fatal(err)
	}
	comp := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"payment.proto": paymentProto}),
	}}
	files, err := comp.Compile(context.Background(), "payment.proto")
	if err != nil {
		t.Fatal(err)
	}
	md := files[0].Messages().ByName("Payment")
	serde, err := streams.Protobuf(reg, "payments-value", paymentProto, func() *dynamicpb.Message { return dynamicpb.NewMessage(md) })
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("id"), protoreflect.ValueOfString("p-1"))
	m.Set(md.Fields().ByName("cents"), protoreflect.ValueOfInt64(1250))
	enc, err := serde.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	src, err := sr.NewClient(sr.URLs("http://" + b.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := src.SchemaByVersion(context.Background(), "payments-value", -1)
	if err != nil {
		t.Fatal(err)
	}
	if ss.Type != sr.TypeProtobuf {
		t.Errorf("registered as %s, want PROTOBUF", ss.Type)
	}
	// 0, id, then the index list [1]: varint count 1, varint 1 (zigzag).
	if enc[0] != 0 || int(binary.BigEndian.Uint32(enc[1:5])) != ss.ID || enc[5] != 2 || enc[6] != 2 {
		t.Fatalf("header % x, want 0, id %d, indexes [1]", enc[:7], ss.ID)
	}
	dec, err := serde.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Get(md.Fields().ByName("id")).String() != "p-1" || dec.Get(md.Fields().ByName("cents")).Int() != 1250 {
		t.Errorf("decoded %v", dec)
	}
	other := append(append([]byte(nil), enc[:5]...), 0) // index [0]: Other
	if _, err := serde.Decode(append(other, enc[7:]...)); !errors.Is(err, streams.ErrSchema) {
		t.Errorf("decoding another message's index: %v, want ErrSchema", err)
	}
}
