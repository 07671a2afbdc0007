package schemacheck

import (
	"testing"

	hamba "github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluice-mq/sluice/internal/registry"
	"github.com/sluice-mq/sluice/internal/schema"
)

// The payload decoders on one ~100-byte record each, as the bench script's
// values (scripts/bench-schemacheck.sh): what the decode check adds per
// record, apart from the walk and the id check.
//
//	go test -run XXX -bench BenchmarkDecode -benchmem ./internal/schemacheck/
func BenchmarkDecode(b *testing.B) {
	const (
		avroText  = `{"type":"record","name":"Payment","namespace":"bench","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"amount","type":"double"},{"name":"payload","type":"bytes"}]}`
		protoText = `syntax = "proto3"; package bench; message Payment { bytes payload = 1; int64 id = 2; }`
		jsonText  = `{"title":"Payment","type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"amount":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}}},"required":["id","name"]}`
	)
	payload := make([]byte, 80)
	avroData, err := hamba.Marshal(hamba.MustParse(avroText), map[string]any{"id": int64(1), "name": "abc", "amount": 2.5, "payload": payload})
	if err != nil {
		b.Fatal(err)
	}
	protoData := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1)
	protoData = protowire.AppendBytes(protowire.AppendTag(protoData, 1, protowire.BytesType), payload[:70])
	jsonData := []byte(`{"id": 12345, "name": "a payment of the usual size", "amount": 12.5, "tags": ["x", "y", "z"]}`)
	for _, tc := range []struct {
		name string
		typ  schema.Type
		text string
		data []byte
	}{{"avro", schema.Avro, avroText, avroData}, {"protobuf", schema.Protobuf, protoText, protoData}, {"json", schema.JSON, jsonText, jsonData}} {
		p, err := schema.Parse(tc.typ, tc.text, nil)
		if err != nil {
			b.Fatal(err)
		}
		cp := compile(&registry.SchemaInfo{ID: 1, Type: tc.typ, Schema: tc.text, Parsed: p})
		md, err := cp.proto0()
		if err != nil {
			b.Fatal(err)
		}
		if err := cp.decode(md, tc.data); err != nil {
			b.Fatalf("%s: %v", tc.name, err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.data)))
			for range b.N {
				if err := cp.decode(md, tc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
