package avro

import (
	"bytes"
	"encoding/json"
	"fmt"

	havro "github.com/hamba/avro/v2"
)

// Schema is a parsed, valid Avro schema.
type Schema struct {
	s     havro.Schema
	canon string
}

// Parse parses and validates schema text; refs maps each reference name
// to the referenced schema's text (named types the schema uses).
func Parse(schema string, refs map[string]string) (s *Schema, err error) {
	defer func() {
		// The parser is third-party code fed user input: a panic in it is
		// an invalid schema, not a crashed broker.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid Avro schema: %v", r)
		}
	}()
	cache := &havro.SchemaCache{}
	// References may use each other: parse those that can be parsed until
	// no more can.
	pending := make(map[string]string, len(refs))
	for k, v := range refs {
		pending[k] = v
	}
	for len(pending) > 0 {
		progress := false
		var lastErr error
		for name, text := range pending {
			if _, err := havro.ParseWithCache(text, "", cache); err != nil {
				lastErr = fmt.Errorf("reference %q: %w", name, err)
				continue
			}
			delete(pending, name)
			progress = true
		}
		if !progress {
			return nil, fmt.Errorf("invalid Avro schema: %w", lastErr)
		}
	}
	hs, err := havro.ParseWithCache(schema, "", cache)
	if err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %w", err)
	}
	return &Schema{s: hs, canon: canonical(schema)}, nil
}

// canonical is the schema text without insignificant whitespace: two
// registrations that differ only in layout are the same schema.
func canonical(text string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return text // a bare name such as "string" that is not JSON
	}
	return b.String()
}

// Canonical is the normalised text used to decide that two registrations
// are the same schema.
func (s *Schema) Canonical() string { return s.canon }

// Incompatibilities lists why data written with writer cannot be read with
// reader (empty: compatible).
func Incompatibilities(reader, writer *Schema) (out []string) {
	defer func() {
		if r := recover(); r != nil {
			out = []string{fmt.Sprintf("checking compatibility failed: %v", r)}
		}
	}()
	if err := havro.NewSchemaCompatibility().Compatible(reader.s, writer.s); err != nil {
		return []string{err.Error()}
	}
	return nil
}
