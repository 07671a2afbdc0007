package schema

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Type is a schema format as the registry's REST API names it.
type Type string

// The schema types; Avro is the default when a request names none.
const (
	Avro     Type = "AVRO"
	Protobuf Type = "PROTOBUF"
	JSON     Type = "JSON"
)

// ErrUnknownType: the schema type is not one of Types.
var ErrUnknownType = errors.New("unknown schema type")

// ErrInvalid: the schema text is not a valid schema of its type.
var ErrInvalid = errors.New("invalid schema")

// ParseType reads a schemaType field: "" is AVRO; case is ignored.
func ParseType(s string) (Type, error) {
	if s == "" {
		return Avro, nil
	}
	t := Type(strings.ToUpper(s))
	if _, ok := formatOf(t); !ok {
		return "", fmt.Errorf("%w %q (this registry knows %v)", ErrUnknownType, s, Types())
	}
	return t, nil
}

// Types lists the schema types this build parses.
func Types() []Type {
	var out []Type
	for _, t := range []Type{JSON, Protobuf, Avro} {
		if _, ok := formatOf(t); ok {
			out = append(out, t)
		}
	}
	return out
}

// parsed is what a format package's Parse returns.
type parsed interface{ Canonical() string }

// format adapts one format package.
type format struct {
	parse  func(text string, refs map[string]string) (parsed, error)
	compat func(reader, writer parsed) []string
}

func formatOf(t Type) (format, bool) {
	switch t {
	case Avro:
		return avroFormat(), true
	case Protobuf:
		return protobufFormat()
	case JSON:
		return jsonFormat()
	}
	return format{}, false
}

// Schema is a parsed schema of a known type.
type Schema struct {
	typ Type
	p   parsed
	f   format
}

// Parse parses text as a schema of type t; refs maps each reference name
// to the referenced schema's text. Errors wrap ErrInvalid or
// ErrUnknownType.
func Parse(t Type, text string, refs map[string]string) (*Schema, error) {
	f, ok := formatOf(t)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownType, t)
	}
	p, err := f.parse(text, refs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Schema{typ: t, p: p, f: f}, nil
}

// Type is the schema's type.
func (s *Schema) Type() Type { return s.typ }

// Canonical is the normalised text that decides that two registrations
// are the same schema.
func (s *Schema) Canonical() string { return s.p.Canonical() }

// Incompatibilities lists why data written with writer cannot be read
// with reader (empty: compatible). Schemas of different types never are.
func Incompatibilities(reader, writer *Schema) []string {
	if reader.typ != writer.typ {
		return []string{fmt.Sprintf("the schema type changed from %s to %s", writer.typ, reader.typ)}
	}
	return reader.f.compat(reader.p, writer.p)
}

// Level is a compatibility level.
type Level string

// The compatibility levels, as Confluent names them.
const (
	None               Level = "NONE"
	Backward           Level = "BACKWARD"
	BackwardTransitive Level = "BACKWARD_TRANSITIVE"
	Forward            Level = "FORWARD"
	ForwardTransitive  Level = "FORWARD_TRANSITIVE"
	Full               Level = "FULL"
	FullTransitive     Level = "FULL_TRANSITIVE"
)

// DefaultLevel is the registry-wide level until one is set (Confluent's).
const DefaultLevel = Backward

// ErrInvalidLevel: not one of the seven levels.
var ErrInvalidLevel = errors.New("invalid compatibility level")

// ParseLevel reads a level name; case is ignored.
func ParseLevel(s string) (Level, error) {
	l := Level(strings.ToUpper(strings.TrimSpace(s)))
	if !slices.Contains([]Level{None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive}, l) {
		return "", fmt.Errorf("%w %q: valid levels are NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE", ErrInvalidLevel, s)
	}
	return l, nil
}

// Check lists why candidate may not follow existing (a subject's versions,
// oldest first) at level l; empty: it may. BACKWARD: the candidate reads
// data written with the latest; FORWARD: the latest reads data written
// with the candidate; FULL both; the _TRANSITIVE forms against every
// version, not only the latest.
func Check(l Level, candidate *Schema, existing []*Schema) []string {
	if l == None || len(existing) == 0 {
		return nil
	}
	against := existing[len(existing)-1:]
	switch l {
	case BackwardTransitive, ForwardTransitive, FullTransitive:
		against = existing
	}
	backward := l != Forward && l != ForwardTransitive
	forward := l != Backward && l != BackwardTransitive
	var out []string
	// Newest first, as Confluent reports them.
	for i := len(against) - 1; i >= 0; i-- {
		old := against[i]
		if backward {
			for _, m := range Incompatibilities(candidate, old) {
				out = append(out, "backward: the new schema cannot read data written with an existing one: "+m)
			}
		}
		if forward {
			for _, m := range Incompatibilities(old, candidate) {
				out = append(out, "forward: an existing schema cannot read data written with the new one: "+m)
			}
		}
	}
	return out
}
