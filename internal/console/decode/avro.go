package decode

import (
	"fmt"

	"github.com/hamba/avro/v2"
)

// avroConfig bounds what decoding untrusted bytes may allocate: a value
// is at most MaxValue, so no string or bytes needs more than that, and
// checkAvro has bounded the items of arrays and maps before.
var avroConfig = avro.Config{MaxByteSliceSize: MaxValue, MaxSliceAllocSize: maxItems}.Freeze()

// maxRefRounds bounds the passes over references that use each other.
const maxRefRounds = 16

func avroDecoder(s Schema) (func([]byte) (Decoded, error), error) {
	cache := &avro.SchemaCache{}
	// References may use each other's types: parse in rounds until every
	// one parses or a round makes no progress.
	pending := s.Refs
	for round := 0; len(pending) > 0 && round < maxRefRounds; round++ {
		var next []Reference
		var lastErr error
		for _, r := range pending {
			if _, err := avro.ParseWithCache(r.Text, "", cache); err != nil {
				next, lastErr = append(next, r), err
			}
		}
		if len(next) == len(pending) {
			return nil, fmt.Errorf("reference %s: %v", next[0].Name, lastErr)
		}
		pending = next
	}
	schema, err := parseAvro(s.Text, cache)
	if err != nil {
		return nil, err
	}
	return func(data []byte) (out Decoded, err error) {
		if err := checkAvro(schema, data); err != nil {
			return Decoded{}, fmt.Errorf("%w: %v", ErrData, err)
		}
		var v any
		if err := decodeAvro(schema, data, &v); err != nil {
			return Decoded{}, fmt.Errorf("%w: %v", ErrData, err)
		}
		out.JSON, err = indent(v)
		return out, err
	}, nil
}

// parseAvro parses schema text, turning a parser panic into an error.
func parseAvro(text string, cache *avro.SchemaCache) (s avro.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("parsing the schema: %v", r)
		}
	}()
	return avro.ParseWithCache(text, "", cache)
}

// decodeAvro decodes one datum, turning a decoder panic into an error.
func decodeAvro(schema avro.Schema, data []byte, v *any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding: %v", r)
		}
	}()
	return avroConfig.Unmarshal(schema, data, v)
}
