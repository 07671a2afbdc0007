package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const (
	avroOrder = `{"type":"record","name":"Order","namespace":"shop","fields":[
		{"name":"id","type":"long"},{"name":"customer","type":"shop.Customer"},{"name":"note","type":["null","string"],"default":null}]}`
	avroCustomer = `{"type":"record","name":"Customer","namespace":"shop","fields":[{"name":"name","type":"string"}]}`
	protoText    = `syntax = "proto3";
package shop;
import "money.proto";
message Header { string trace = 1; }
message Payment { string id = 1; money.Amount amount = 2; repeated string tags = 3;
  message Refund { string reason = 1; } }`
	protoMoney = `syntax = "proto3"; package money; message Amount { int64 cents = 1; string currency = 2; }`
)

func schemas() map[int]Schema {
	return map[int]Schema{
		1: {ID: 1, Type: "AVRO", Text: avroOrder, Refs: []Reference{{Name: "shop.Customer", Text: avroCustomer}}, Subject: "orders-value", Version: 2},
		2: {ID: 2, Type: "PROTOBUF", Text: protoText, Refs: []Reference{{Name: "money.proto", Text: protoMoney}}, Subject: "payments-value", Version: 1},
		3: {ID: 3, Type: "JSON", Text: `{"type":"object"}`, Subject: "events-value", Version: 1},
		4: {ID: 4, Type: "AVRO", Text: `{"type":"record","name":"Broken"`},
	}
}

func lookup(ctx context.Context, id int) (Schema, error) {
	s, ok := schemas()[id]
	if !ok {
		return Schema{}, errors.New("schema not found")
	}
	return s, nil
}

func wire(id int, data []byte) []byte {
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	return append(b, data...)
}

func TestDecode(t *testing.T) {
	ctx := context.Background()
	cust := avro.MustParse(avroCustomer)
	cache := &avro.SchemaCache{}
	cache.Add("shop.Customer", cust)
	order, err := avro.ParseWithCache(avroOrder, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	avroData, err := avro.Marshal(order, map[string]any{"id": int64(42), "customer": map[string]any{"name": "Ada"}, "note": "rush"})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := compileProto(map[string]string{mainFile: protoText, "money.proto": protoMoney})
	if err != nil {
		t.Fatal(err)
	}
	pay := dynamicpb.NewMessage(fd.Messages().Get(1))
	pay.Set(pay.Descriptor().Fields().ByName("id"), protoValue("p-7"))
	pb, err := proto.Marshal(pay)
	if err != nil {
		t.Fatal(err)
	}
	// Message indexes [1]: count 1, index 1, both zigzag varints.
	payIdx := binary.AppendVarint(binary.AppendVarint(nil, 1), 1)
	refund := dynamicpb.NewMessage(fd.Messages().Get(1).Messages().Get(0))
	refund.Set(refund.Descriptor().Fields().ByName("reason"), protoValue("damaged"))
	rb, _ := proto.Marshal(refund)
	refundIdx := binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(nil, 2), 1), 0)
	hdr := dynamicpb.NewMessage(fd.Messages().Get(0))
	hdr.Set(hdr.Descriptor().Fields().ByName("trace"), protoValue("t-1"))
	hb, _ := proto.Marshal(hdr)

	for _, tc := range []struct {
		name    string
		in      []byte
		want    []string // in the JSON
		message string
		err     error
	}{
		{"avro with a reference", wire(1, avroData), []string{`"id": 42`, `"name": "Ada"`, `"rush"`}, "", nil},
		{"protobuf second message", wire(2, append(payIdx, pb...)), []string{`"id": "p-7"`}, "shop.Payment", nil},
		{"protobuf nested message", wire(2, append(refundIdx, rb...)), []string{`"reason": "damaged"`}, "shop.Payment.Refund", nil},
		{"protobuf first message, short form", wire(2, append([]byte{0}, hb...)), []string{`"trace": "t-1"`}, "shop.Header", nil},
		{"json schema", wire(3, []byte(`{"a":1}`)), []string{`"a": 1`}, "", nil},
		{"plain text", []byte("hello world"), nil, "", ErrNotWire},
		{"short", []byte{0, 0, 0}, nil, "", ErrNotWire},
		{"unknown id", wire(99, []byte{1}), nil, "", ErrSchema},
		{"broken schema", wire(4, []byte{1}), nil, "", ErrSchema},
		{"avro truncated", wire(1, avroData[:2]), nil, "", ErrData},
		{"protobuf index out of range", wire(2, binary.AppendVarint(binary.AppendVarint(nil, 1), 9)), nil, "", ErrData},
		{"protobuf bad index count", wire(2, binary.AppendVarint(nil, 1000)), nil, "", ErrData},
		{"protobuf garbage", wire(2, []byte{0, 0xff, 0xff, 0xff}), nil, "", ErrData},
		{"json garbage", wire(3, []byte(`{"a":`)), nil, "", ErrData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(lookup)
			got, err := d.Decode(ctx, tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.JSON, w) {
					t.Errorf("JSON lacks %s:\n%s", w, got.JSON)
				}
			}
			if got.Message != tc.message {
				t.Errorf("message %q, want %q", got.Message, tc.message)
			}
			if s := schemas()[got.SchemaID]; got.Subject != s.Subject || got.Version != s.Version {
				t.Errorf("subject %s v%d", got.Subject, got.Version)
			}
		})
	}
}

// FuzzDecode: any bytes under any of the test schemas decode or fail with
// an error, never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(wire(1, []byte{84, 6, 65, 100, 97, 2, 8, 114, 117, 115, 104}))
	f.Add(wire(2, []byte{2, 2, 10, 3, 112, 45, 55}))
	f.Add(wire(2, []byte{0, 10, 3, 116, 45, 49}))
	f.Add(wire(3, []byte(`{"a":[1,2,{"b":null}]}`)))
	f.Add(wire(1, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := New(lookup)
		got, err := d.Decode(context.Background(), b)
		if err == nil && got.JSON == "" {
			t.Fatalf("no error and no JSON for %x", b)
		}
	})
}

func protoValue(s string) protoreflect.Value { return protoreflect.ValueOfString(s) }

// TestDecodeBounds: values up to MaxValue decode; data that would nest
// deeper than the walk allows (a recursive schema), claim more items than
// it has bytes, or indent into more than MaxJSON is refused or laid out
// compactly, never a crash or an unbounded allocation.
func TestDecodeBounds(t *testing.T) {
	ctx := context.Background()
	const (
		list  = `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`
		nulls = `{"type":"array","items":"null"}`
		blob  = `{"type":"record","name":"B","fields":[{"name":"s","type":"string"}]}`
	)
	texts := map[int]string{10: list, 11: nulls, 12: blob}
	d := New(func(_ context.Context, id int) (Schema, error) {
		return Schema{ID: id, Type: "AVRO", Text: texts[id]}, nil
	})
	big := strings.Repeat("x", 200<<10)
	blobData, err := avro.Marshal(avro.MustParse(blob), map[string]any{"s": big})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(ctx, wire(12, blobData))
	if err != nil || !strings.Contains(got.JSON, big) {
		t.Fatalf("a 200 KiB string: %v (%d bytes of JSON)", err, len(got.JSON))
	}
	deep := append(bytes.Repeat([]byte{2}, 4<<20), 0)
	if _, err := d.Decode(ctx, wire(10, deep)); !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("4 Mi levels of a recursive schema: %v", err)
	}
	shallow := append(bytes.Repeat([]byte{2}, 100), 0)
	if _, err := d.Decode(ctx, wire(10, shallow)); err != nil {
		t.Fatalf("100 levels: %v", err)
	}
	if _, err := d.Decode(ctx, wire(11, binary.AppendVarint(nil, 1<<40))); !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "items") {
		t.Fatalf("2^40 nulls: %v", err)
	}
	if _, err := d.Decode(ctx, wire(12, append([]byte{0}, make([]byte, MaxValue)...))); !errors.Is(err, ErrData) {
		t.Fatalf("a value over MaxValue: %v", err)
	}
	// JSON Schema data nested 9,000 deep: indented, it would take 300 MiB;
	// it is shown compact. Deeper than encoding/json's 10,000 is an error.
	nested := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	d3 := New(func(_ context.Context, id int) (Schema, error) { return Schema{ID: id, Type: "JSON"}, nil })
	got, err = d3.Decode(ctx, wire(3, []byte(nested)))
	if err != nil || got.JSON != nested {
		t.Fatalf("deep JSON: %v, %d bytes", err, len(got.JSON))
	}
	if _, err := d3.Decode(ctx, wire(3, []byte(strings.Repeat("[", 1<<20)))); !errors.Is(err, ErrData) {
		t.Fatalf("JSON 1 Mi deep: %v", err)
	}

	// 8 MiB that would become millions of Go values (gigabytes) are
	// refused before they are built; a thousand are decoded.
	records := `{"type":"array","items":{"type":"record","name":"E","fields":[]}}`
	dr := New(func(_ context.Context, id int) (Schema, error) {
		return Schema{ID: id, Type: "AVRO", Text: records}, nil
	})
	if _, err := dr.Decode(ctx, wire(5, append(binary.AppendVarint(nil, 500_000), 0))); !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "records") {
		t.Fatalf("500,000 empty records: %v", err)
	}
	if got, err := dr.Decode(ctx, wire(5, append(binary.AppendVarint(nil, 1000), 0))); err != nil || strings.Count(got.JSON, "{}") != 1000 {
		t.Fatalf("1,000 empty records: %v", err)
	}
	const repeated = `syntax = "proto3"; message M { repeated E e = 1; repeated int32 n = 2; } message E {}`
	dp := New(func(_ context.Context, id int) (Schema, error) {
		return Schema{ID: id, Type: "PROTOBUF", Text: repeated}, nil
	})
	if _, err := dp.Decode(ctx, wire(6, append([]byte{0}, bytes.Repeat([]byte{0x0a, 0}, 4<<20-8)...))); !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "messages") {
		t.Fatalf("4 Mi empty messages: %v", err)
	}
	packed := append([]byte{0, 0x12}, binary.AppendUvarint(nil, 8<<20-16)...)
	packed = append(packed, make([]byte, 8<<20-16)...)
	if _, err := dp.Decode(ctx, wire(6, packed)); !errors.Is(err, ErrData) || !strings.Contains(err.Error(), "repeated elements") {
		t.Fatalf("8 Mi packed ints: %v", err)
	}
	if got, err := dp.Decode(ctx, wire(6, append([]byte{0}, bytes.Repeat([]byte{0x0a, 0}, 1000)...))); err != nil || strings.Count(got.JSON, "{}") != 1000 {
		t.Fatalf("1,000 empty messages: %v", err)
	}
}
