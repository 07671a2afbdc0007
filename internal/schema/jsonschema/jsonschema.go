package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	js "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-mq/sluice/internal/schema/jsonlimit"
	"github.com/sluice-mq/sluice/internal/schema/limits"
)

// Limits on schema text and on the work of one compatibility check.
const (
	maxSchemaBytes = 1 << 20
	maxDepth       = 128
	// baseURL locates the schema and its relative references; it is never fetched.
	baseURL = "sluice:///schemas/"
	mainLoc = baseURL + "schema.json"
)

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid JSON Schema")

// Schema is a compiled JSON Schema with its references resolved.
type Schema struct {
	root      *js.Schema
	canonical string
}

// Parse compiles schema. refs maps each $ref URL used by the schema (absolute, or relative to the
// schema's $id) to the referenced document. Schemas without "$schema" are read as draft-07, as
// Confluent does.
func Parse(schema string, refs map[string]string) (*Schema, error) {
	if err := limits.Refs(refs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	doc, err := decode(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	root, err := compile(doc, refs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	canonical, err := canonicalJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &Schema{root: root, canonical: canonical}, nil
}

func decode(text string) (any, error) {
	if err := jsonlimit.Check(text, maxSchemaBytes, maxDepth); err != nil {
		return nil, err
	}
	if !utf8.ValidString(text) {
		return nil, errors.New("not valid UTF-8")
	}
	doc, err := js.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	switch doc.(type) {
	case map[string]any, bool:
		return doc, nil
	}
	return nil, errors.New("a schema is a JSON object or a boolean")
}

func compile(doc any, refs map[string]string) (s *js.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("compiler failure: %v", r)
		}
	}()
	c := js.NewCompiler()
	c.DefaultDraft(js.Draft7)
	// No loader: a $ref that is neither in the document nor a reference fails to compile.
	c.UseLoader(js.SchemeURLLoader{})
	bases := []string{baseURL}
	if m, ok := doc.(map[string]any); ok {
		if id, ok := m["$id"].(string); ok && id != "" {
			bases = append(bases, id)
		} else if id, ok := m["id"].(string); ok && id != "" {
			bases = append(bases, id)
		}
	}
	names := make([]string, 0, len(refs))
	for name := range refs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rdoc, err := decode(refs[name])
		if err != nil {
			return nil, fmt.Errorf("reference %q: %v", name, err)
		}
		added := map[string]bool{}
		for _, base := range bases {
			loc, err := resolve(base, name)
			if err != nil || added[loc] {
				continue
			}
			added[loc] = true
			if err := c.AddResource(loc, rdoc); err != nil {
				return nil, fmt.Errorf("reference %q: %v", name, err)
			}
		}
		if len(added) == 0 {
			return nil, fmt.Errorf("reference %q: not a URL", name)
		}
	}
	if err := c.AddResource(mainLoc, doc); err != nil {
		return nil, err
	}
	return c.Compile(mainLoc)
}

// resolve returns ref as an absolute URL without fragment, relative to base.
func resolve(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	u := b.ResolveReference(r)
	u.Fragment = ""
	if !u.IsAbs() {
		return "", fmt.Errorf("%q is not absolute", u)
	}
	return u.String(), nil
}

// Canonical returns the schema as compact JSON with object keys sorted and numbers kept as
// written.
func (s *Schema) Canonical() string { return s.canonical }

// String returns the canonical text.
func (s *Schema) String() string { return s.canonical }

func canonicalJSON(doc any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
