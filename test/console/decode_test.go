package console_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/chromedp/chromedp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestConsoleDecodesThroughRegistry: records in the Confluent wire format,
// encoded by franz-go's sr header (as Confluent serializers write it) with
// Avro, Protobuf (a nested message, with a referenced file) and JSON
// Schema, are shown decoded in the message browser with their schema id,
// subject and version; a record that is not in the format stays text.
func TestConsoleDecodesThroughRegistry(t *testing.T) {
	b := testbroker.Start(t)
	ui := "http://" + b.AdminAddr() + "/ui/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rcl, err := sr.NewClient(sr.URLs("http://" + b.RegistryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	register := func(subject string, s sr.Schema) int {
		t.Helper()
		ss, err := rcl.CreateSchema(ctx, subject, s)
		if err != nil {
			t.Fatalf("registering %s: %v", subject, err)
		}
		return ss.ID
	}
	const avroText = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`
	const moneyText = `syntax = "proto3"; package money; message Amount { int64 cents = 1; string currency = 2; }`
	const payText = `syntax = "proto3"; package shop; import "money.proto";
message Envelope { message Payment { string id = 1; money.Amount amount = 2; } }`
	avroID := register("typed-value", sr.Schema{Schema: avroText})
	register("money", sr.Schema{Schema: moneyText, Type: sr.TypeProtobuf})
	protoID := register("payments-value", sr.Schema{Schema: payText, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "money.proto", Subject: "money", Version: 1}}})
	jsonID := register("events-value", sr.Schema{Schema: `{"type":"object","properties":{"kind":{"type":"string"}}}`, Type: sr.TypeJSON})

	var h sr.ConfluentHeader
	avroData, err := avro.Marshal(avro.MustParse(avroText), map[string]any{"id": int64(42), "item": "lamp"})
	if err != nil {
		t.Fatal(err)
	}
	avroValue, _ := h.AppendEncode(nil, avroID, nil)
	avroValue = append(avroValue, avroData...)

	files, err := (&protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"pay.proto": payText, "money.proto": moneyText})})}).Compile(ctx, "pay.proto")
	if err != nil {
		t.Fatal(err)
	}
	payment := files[0].Messages().Get(0).Messages().Get(0)
	msg := dynamicpb.NewMessage(payment)
	msg.Set(payment.Fields().ByName("id"), protoreflect.ValueOfString("p-7"))
	amount := msg.Mutable(payment.Fields().ByName("amount")).Message()
	amount.Set(amount.Descriptor().Fields().ByName("cents"), protoreflect.ValueOfInt64(1250))
	amount.Set(amount.Descriptor().Fields().ByName("currency"), protoreflect.ValueOfString("EUR"))
	pb, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	protoValue, _ := h.AppendEncode(nil, protoID, []int{0, 0})
	protoValue = append(protoValue, pb...)
	jsonValue, _ := h.AppendEncode(nil, jsonID, nil)
	jsonValue = append(jsonValue, `{"kind":"signup"}`...)

	testbroker.CreateTopic(t, b.Addr(), "typed", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("typed"))
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Key: []byte("a"), Value: avroValue},
		&kgo.Record{Key: []byte("p"), Value: protoValue},
		&kgo.Record{Key: []byte("j"), Value: jsonValue},
		&kgo.Record{Key: []byte("t"), Value: []byte("just text")},
		// Starts like the wire format, but no schema has the id: shown as
		// text, with why it was not decoded.
		&kgo.Record{Key: []byte("z"), Value: []byte("\x00\x00\x00\x03\xe7 zero-led bytes")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bctx := browser(t)
	if err := chromedp.Do(bctx, chromedp.Navigate(ui+"topics/typed?partition=0"), chromedp.WaitVisible(chromedp.CSS("#messages"))); err != nil {
		t.Fatal(err)
	}
	m := text(t, bctx, "#messages")
	for _, want := range []string{
		"AVRO · schema " + itoa(avroID) + " · typed-value v1", `"id": 42`, `"item": "lamp"`,
		"PROTOBUF · schema " + itoa(protoID) + " · payments-value v1 · shop.Envelope.Payment", `"id": "p-7"`, `"cents": "1250"`, `"currency": "EUR"`,
		"JSON · schema " + itoa(jsonID) + " · events-value v1", `"kind": "signup"`,
		"just text",
		"not decoded: schema 999", "zero-led bytes",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the message browser lacks %q:\n%s", want, m)
		}
	}
	screenshot(t, bctx, "decoded")
}

func itoa(n int) string { return strconv.Itoa(n) }
