package streams

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type fuzzOrder struct {
	ID     string            `avro:"id" json:"id"`
	Amount int64             `avro:"amount" json:"amount"`
	Tags   []string          `avro:"tags" json:"tags"`
	Attrs  map[string]string `avro:"attrs" json:"attrs"`
}

const fuzzAvroSchema = `{"type":"record","name":"Order","fields":[
{"name":"id","type":"string"},{"name":"amount","type":"long"},
{"name":"tags","type":{"type":"array","items":"string"}},
{"name":"attrs","type":{"type":"map","values":"string"}}]}`

// FuzzRegistryDecode feeds arbitrary record bytes to the registry serdes'
// decoders (schema id 1 is known, so no registry is called): they return
// a value or an error, never panic or run away.
func FuzzRegistryDecode(f *testing.F) {
	reg := &Registry{schemas: map[int]sr.Schema{
		1: {Schema: fuzzAvroSchema, Type: sr.TypeAvro},
	}}
	av, err := Avro[fuzzOrder](reg, "o-value", fuzzAvroSchema)
	if err != nil {
		f.Fatal(err)
	}
	pb, err := Protobuf(reg, "s-value", "", func() *wrapperspb.StringValue { return new(wrapperspb.StringValue) })
	if err != nil {
		f.Fatal(err)
	}
	js, err := JSONSchema[fuzzOrder](reg, "j-value", `{"type":"object"}`)
	if err != nil {
		f.Fatal(err)
	}
	av.(*avroSerde[fuzzOrder]).reg.id = 1
	pb.(*protoSerde[*wrapperspb.StringValue]).reg.id = 1
	js.(*jsonSchemaSerde[fuzzOrder]).reg.id = 1
	for _, seed := range [][]byte{
		mustEncode(f, av, fuzzOrder{ID: "o1", Amount: 7, Tags: []string{"a"}, Attrs: map[string]string{"k": "v"}}),
		mustEncode(f, pb, wrapperspb.String("hello")),
		mustEncode(f, js, fuzzOrder{ID: "o2"}),
		{0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, // a huge varint length
		{0, 0, 0, 0, 1, 0x80},
		{1, 2, 3},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 5 {
			b[1], b[2], b[3], b[4] = 0, 0, 0, 1 // the known id
		}
		for _, dec := range []func([]byte) error{
			func(b []byte) error { _, err := av.Decode(b); return err },
			func(b []byte) error { _, err := pb.Decode(b); return err },
			func(b []byte) error { _, err := js.Decode(b); return err },
		} {
			if err := dec(b); err != nil && !errors.Is(err, ErrSchema) {
				t.Fatalf("decoding % x: %v does not wrap ErrSchema", b, err)
			}
		}
	})
}

func mustEncode[T any](f *testing.F, s Serde[T], v T) []byte {
	b, err := s.Encode(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// An array claiming 2^40 elements is refused, not allocated.
func TestAvroDecodeBoundsArrays(t *testing.T) {
	reg := &Registry{schemas: map[int]sr.Schema{1: {Schema: fuzzAvroSchema, Type: sr.TypeAvro}}}
	av, err := Avro[fuzzOrder](reg, "o-value", fuzzAvroSchema)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0, 0, 0, 0, 1, 2, 'o', 2} // id 1, id "o", amount 1
	b = binary.AppendVarint(b, 1<<40)     // tags: a block of 2^40 strings
	if _, err := av.Decode(b); !errors.Is(err, ErrSchema) {
		t.Fatalf("decoding a 2^40-element array: %v, want ErrSchema", err)
	}
}
