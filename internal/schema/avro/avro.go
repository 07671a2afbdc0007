package avro

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	hamba "github.com/hamba/avro/v2"

	"github.com/sluice-mq/sluice/internal/schema/jsonlimit"
	"github.com/sluice-mq/sluice/internal/schema/limits"
)

// Limits on schema text: the parser recurses on JSON nesting and on named types.
const (
	maxSchemaBytes = 1 << 20
	maxDepth       = 128
)

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid Avro schema")

// Schema is a parsed Avro schema, with the named types of its references resolved.
type Schema struct {
	root      hamba.Schema
	canonical string
}

// Parse parses and validates schema text. refs maps each referenced named type's full name to the
// text of the schema that defines it; referenced schemas may use each other's types.
func Parse(schema string, refs map[string]string) (*Schema, error) {
	if err := limits.Refs(refs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	cache := &hamba.SchemaCache{}
	if err := parseRefs(refs, cache); err != nil {
		return nil, err
	}
	root, err := parseText(schema, cache)
	if err != nil {
		return nil, err
	}
	if err := checkNullNamespaces(root, ""); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	canonical, err := canonicalJSON(root)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &Schema{root: root, canonical: canonical}, nil
}

// parseRefs parses references in dependency order: a reference that names a type not yet known is
// retried after the others, and fails only when a whole round makes no progress.
func parseRefs(refs map[string]string, cache *hamba.SchemaCache) error {
	pending := make([]string, 0, len(refs))
	for name := range refs {
		pending = append(pending, name)
	}
	sort.Strings(pending)
	for len(pending) > 0 {
		var retry []string
		var lastErr error
		for _, name := range pending {
			if _, err := parseText(refs[name], cache); err != nil {
				lastErr = fmt.Errorf("reference %q: %w", name, err)
				if !strings.Contains(err.Error(), "unknown type") {
					return lastErr // not waiting for another reference
				}
				retry = append(retry, name)
			}
		}
		if len(retry) == len(pending) {
			return lastErr
		}
		pending = retry
	}
	return nil
}

// parseText parses one schema into cache. The library is not trusted with hostile input: text is
// bounded first and a panic becomes an error.
func parseText(text string, cache *hamba.SchemaCache) (s hamba.Schema, err error) {
	if err := jsonlimit.Check(text, maxSchemaBytes, maxDepth); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalid)
	}
	if !json.Valid([]byte(text)) {
		return nil, fmt.Errorf("%w: not valid JSON", ErrInvalid)
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w: %v", ErrInvalid, r)
		}
	}()
	// Parse into a copy so that a failed parse leaves no half-defined names behind.
	scratch := &hamba.SchemaCache{}
	scratch.AddAll(cache)
	s, err = hamba.ParseWithCache(text, "", scratch)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	cache.AddAll(scratch)
	return s, nil
}

// Canonical returns the schema as compact JSON with full names and a fixed attribute order,
// keeping what Confluent keeps beyond the Parsing Canonical Form: doc, aliases, defaults, field
// order and custom properties (sorted).
func (s *Schema) Canonical() string { return s.canonical }

// String returns the canonical text.
func (s *Schema) String() string { return s.canonical }

func canonicalJSON(root hamba.Schema) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("rendering schema: %v", r)
		}
	}()
	b, err := json.Marshal(root)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// checkNullNamespaces rejects a named type in the null namespace (a name written ".Name") defined
// inside a type with a namespace: the canonical JSON, which carries no "namespace" attribute,
// would give it the enclosing namespace when parsed again.
func checkNullNamespaces(s hamba.Schema, enclosing string) error {
	switch t := s.(type) {
	case *hamba.RecordSchema:
		if t.Namespace() == "" && enclosing != "" {
			return fmt.Errorf("named type %s in the null namespace inside namespace %s is not supported", t.FullName(), enclosing)
		}
		for _, f := range t.Fields() {
			if err := checkNullNamespaces(f.Type(), t.Namespace()); err != nil {
				return err
			}
		}
	case hamba.NamedSchema:
		if t.Namespace() == "" && enclosing != "" {
			return fmt.Errorf("named type %s in the null namespace inside namespace %s is not supported", t.FullName(), enclosing)
		}
	case *hamba.ArraySchema:
		return checkNullNamespaces(t.Items(), enclosing)
	case *hamba.MapSchema:
		return checkNullNamespaces(t.Values(), enclosing)
	case *hamba.UnionSchema:
		for _, b := range t.Types() {
			if err := checkNullNamespaces(b, enclosing); err != nil {
				return err
			}
		}
	}
	return nil
}
