// Package decode turns record keys and values in the Confluent wire format
// (a zero magic byte, a 4-byte big-endian schema id, then the encoded
// data; Protobuf adds the message indexes) into JSON for reading, through
// the schema the id names: Avro with hamba/avro, Protobuf with a message
// built at run time (dynamicpb) from the schema compiled by protocompile,
// JSON Schema as the JSON it is. It is the console's message browser's
// decoder; the bytes come from the log, so anything malformed is an
// error, never a panic, and every allocation is bounded: values are at
// most MaxValue, and Avro and Protobuf bytes are walked against their
// schema before they are decoded (avrowalk.go, protowalk.go).
package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Errors.
var (
	ErrNotWire = errors.New("not in the schema registry's wire format")
	ErrSchema  = errors.New("schema")
	ErrData    = errors.New("data does not match its schema")
)

// Reference is one schema reference: its name (Avro: the type's full
// name; Protobuf: the import path) and the text of the schema it names.
type Reference struct {
	Name string
	Text string
}

// Schema is a registered schema as a Lookup answers it.
type Schema struct {
	ID      int
	Type    string // AVRO (or ""), PROTOBUF, JSON
	Text    string
	Refs    []Reference
	Subject string // one subject it is registered under ("" if none)
	Version int
}

// Lookup finds a registered schema by id.
type Lookup func(ctx context.Context, id int) (Schema, error)

// Decoded is one key or value decoded.
type Decoded struct {
	SchemaID int
	Type     string
	Subject  string
	Version  int
	// Message is the Protobuf message type ("" for other types).
	Message string
	// JSON is the decoded data, indented.
	JSON string
}

// Decoder decodes records through a Lookup, compiling each schema once.
// Not safe for concurrent use: make one per page.
type Decoder struct {
	lookup   Lookup
	compiled map[int]*compiled
}

type compiled struct {
	s      Schema
	err    error
	decode func(data []byte) (Decoded, error)
}

// New returns a decoder over lookup.
func New(lookup Lookup) *Decoder {
	return &Decoder{lookup: lookup, compiled: map[int]*compiled{}}
}

// maxSchemas bounds the distinct schemas one decoder compiles.
const maxSchemas = 64

// SchemaID returns the schema id of b if it is in the wire format.
func SchemaID(b []byte) (int, bool) {
	if len(b) < 5 || b[0] != 0 {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(b[1:5])), true
}

// MaxValue bounds the keys and values decoded: the console reads a
// record's whole value up to this size (docs/console.md).
const MaxValue = 8 << 20

// Decode decodes b, or says why it cannot (ErrNotWire when b is not in
// the wire format at all).
func (d *Decoder) Decode(ctx context.Context, b []byte) (Decoded, error) {
	id, ok := SchemaID(b)
	if !ok {
		return Decoded{}, ErrNotWire
	}
	if len(b) > MaxValue {
		return Decoded{SchemaID: id}, fmt.Errorf("%w: %d bytes, more than the %d decoded", ErrData, len(b), MaxValue)
	}
	c := d.compiled[id]
	if c == nil {
		if len(d.compiled) >= maxSchemas {
			return Decoded{SchemaID: id}, fmt.Errorf("%w %d: more than %d schemas on one page", ErrSchema, id, maxSchemas)
		}
		c = d.compile(ctx, id)
		d.compiled[id] = c
	}
	if c.err != nil {
		return Decoded{SchemaID: id, Type: c.s.Type, Subject: c.s.Subject, Version: c.s.Version}, c.err
	}
	out, err := c.decode(b[5:])
	out.SchemaID, out.Type, out.Subject, out.Version = id, c.s.Type, c.s.Subject, c.s.Version
	return out, err
}

func (d *Decoder) compile(ctx context.Context, id int) *compiled {
	s, err := d.lookup(ctx, id)
	c := &compiled{s: s}
	if err != nil {
		c.err = fmt.Errorf("%w %d: %v", ErrSchema, id, err)
		return c
	}
	if c.s.Type == "" {
		c.s.Type = "AVRO"
	}
	switch strings.ToUpper(c.s.Type) {
	case "AVRO":
		c.decode, err = avroDecoder(s)
	case "PROTOBUF":
		c.decode, err = protobufDecoder(s)
	case "JSON":
		c.decode = jsonDecode
	default:
		err = fmt.Errorf("unknown schema type %q", s.Type)
	}
	if err != nil {
		c.err = fmt.Errorf("%w %d: %v", ErrSchema, id, err)
	}
	return c
}

// jsonDecode shows JSON Schema data, which is JSON text.
func jsonDecode(data []byte) (Decoded, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return Decoded{}, fmt.Errorf("%w: not JSON: %v", ErrData, err)
	}
	return Decoded{JSON: shape(buf.Bytes())}, nil
}

// indent renders v as JSON, indented when that stays small (shape).
func indent(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrData, err)
	}
	return shape(b), nil
}

// MaxJSON bounds the JSON text of one decoded key or value.
const MaxJSON = 16 << 20

// shape indents compact JSON unless the indentation would take it past
// MaxJSON (deep nesting makes every line long: the text grows with the
// depth times the lines), and cuts what is still longer at MaxJSON.
func shape(compact []byte) string {
	depth, deepest, lines := 0, 0, 0
	inString, escaped := false, false
	for _, c := range compact {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
			lines++
		case c == '}' || c == ']':
			depth--
			lines++
		case c == ',':
			lines++
		}
	}
	if int64(len(compact))+int64(lines)*int64(2*deepest+2) <= MaxJSON {
		var buf bytes.Buffer
		if json.Indent(&buf, compact, "", "  ") == nil {
			return buf.String()
		}
	}
	if len(compact) > MaxJSON {
		return strings.ToValidUTF8(string(compact[:MaxJSON]), "") + fmt.Sprintf(" ... (cut: %d bytes of JSON in all)", len(compact))
	}
	return string(compact)
}
