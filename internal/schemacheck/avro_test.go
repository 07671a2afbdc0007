package schemacheck

import (
	"bytes"
	"testing"

	hamba "github.com/hamba/avro/v2"

	"github.com/sluice-mq/sluice/internal/registry"
	"github.com/sluice-mq/sluice/internal/schema"
)

// A schema with every kind of Avro type, and a recursive one.
const (
	richSchema = `{"type":"record","name":"Rich","namespace":"t","fields":[
	 {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
	 {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},
	 {"name":"by","type":"bytes"},{"name":"n","type":"null"},
	 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
	 {"name":"fx","type":{"type":"fixed","name":"F3","size":3}},
	 {"name":"a","type":{"type":"array","items":"int"}},
	 {"name":"m","type":{"type":"map","values":"string"}},
	 {"name":"u","type":["null","string","Color"]},
	 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	listSchema = `{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`
)

func richValue() map[string]any {
	return map[string]any{"b": true, "i": int32(-5), "l": int64(1) << 40, "f": float32(1.5), "d": 2.25, "s": "héllo",
		"by": []byte{0, 1}, "n": nil, "e": "GREEN", "fx": [3]byte{1, 2, 3}, "a": []int32{1, 2, 3},
		"m": map[string]any{"k": "v", "k2": "v2"}, "u": map[string]any{"string": "x"}, "ts": int64(1700000000000)}
}

func TestCheckAvro(t *testing.T) {
	rich := hamba.MustParse(richSchema)
	good, err := hamba.Marshal(rich, richValue())
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAvro(rich, good); err != nil {
		t.Fatalf("a value hamba/avro encoded: %v", err)
	}
	list := hamba.MustParse(listSchema)
	deep, err := hamba.Marshal(list, map[string]any{"v": 1, "next": map[string]any{"Node": map[string]any{"v": 2, "next": nil}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAvro(list, deep); err != nil {
		t.Fatalf("a recursive value: %v", err)
	}
	for name, b := range map[string][]byte{
		"truncated":       good[:len(good)-1],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"boolean 2":       append([]byte{2}, good[1:]...),
		"empty":           nil,
		"endless list":    bytes.Repeat([]byte{2, 2}, 100000), // v=1, next=branch 1, ... deeper than allowed
		"bad union":       {2, 4},                             // v=1, branch 2 of 2
		"unterminated":    {2},
		"huge string len": {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
	} {
		s := rich
		if name == "endless list" || name == "bad union" || name == "unterminated" {
			s = list
		}
		if err := checkAvro(s, b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Enum index out of range, string not UTF-8, in an otherwise good value.
	if err := checkAvro(hamba.MustParse(`{"type":"enum","name":"E","symbols":["A"]}`), []byte{2}); err == nil {
		t.Error("enum symbol 1 of 1 accepted")
	}
	if err := checkAvro(hamba.MustParse(`"string"`), []byte{2, 0xff}); err == nil {
		t.Error("a string that is not UTF-8 accepted")
	}
	// An array of a million nulls in four bytes is more work than allowed.
	if err := checkAvro(hamba.MustParse(`{"type":"array","items":"null"}`), []byte{0x80, 0x89, 0x7a, 0}); err == nil {
		t.Error("a million empty items accepted")
	}
}

// FuzzCheckAvro: checkAvro never panics or runs away, and what it accepts
// hamba/avro decodes.
func FuzzCheckAvro(f *testing.F) {
	rich := hamba.MustParse(richSchema)
	good, err := hamba.Marshal(rich, richValue())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{0x03, 0x04, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := checkAvro(rich, b); err != nil {
			return
		}
		var v any
		if err := hamba.Unmarshal(rich, b, &v); err != nil {
			t.Fatalf("checkAvro accepted what hamba/avro does not decode: %v", err)
		}
	})
}

// FuzzMessageIndexes: a Protobuf payload's indexes read or fail, within
// their bounds.
func FuzzMessageIndexes(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{2, 2, 9})
	f.Add([]byte{4, 0, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var path [maxIndexes]int32
		n, idx, data, err := messageIndexes(b, &path)
		if err != nil {
			return
		}
		if n < 1 || n > maxIndexes || len(idx)+len(data) != len(b) {
			t.Fatalf("n %d, %d+%d bytes of %d", n, len(idx), len(data), len(b))
		}
		for _, i := range path[:n] {
			if i < 0 {
				t.Fatalf("negative index %d", i)
			}
		}
	})
}

// FuzzDecode: the payload check of each format takes any bytes without
// panicking or running away.
func FuzzDecode(f *testing.F) {
	texts := []struct {
		typ  schema.Type
		text string
	}{
		{schema.Avro, richSchema},
		{schema.Protobuf, `syntax = "proto3"; package f; message M { int64 id = 1; string s = 2; repeated N ns = 3; map<string, N> m = 4; } message N { bytes b = 1; M back = 2; }`},
		{schema.JSON, `{"title":"T","type":"object","properties":{"id":{"type":"integer"},"xs":{"type":"array","items":{"type":"string"}}},"required":["id"]}`},
	}
	cps := make([]*compiled, len(texts))
	for i, tc := range texts {
		p, err := schema.Parse(tc.typ, tc.text, nil)
		if err != nil {
			f.Fatal(err)
		}
		cps[i] = compile(&registry.SchemaInfo{ID: i + 1, Type: tc.typ, Schema: tc.text, Parsed: p})
	}
	good, _ := hamba.Marshal(hamba.MustParse(richSchema), richValue())
	f.Add(uint8(0), good)
	f.Add(uint8(1), []byte{0x08, 0x96, 0x01, 0x12, 0x02, 'h', 'i', 0x1a, 0x02, 0x0a, 0x00})
	f.Add(uint8(1), []byte{0x22, 0x07, 0x0a, 0x01, 'k', 0x12, 0x02, 0x0a, 0x00})
	f.Add(uint8(2), []byte(`{"id": 1, "xs": ["a"]}`))
	f.Add(uint8(2), []byte(`[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		cp := cps[int(kind)%len(cps)]
		md, err := cp.proto0()
		if err != nil {
			t.Fatal(err)
		}
		_ = cp.decode(md, data)
	})
}
