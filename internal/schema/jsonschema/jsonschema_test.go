package jsonschema

import (
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

type parseError compattest.ParseError

func TestParseErrors(t *testing.T) {
	compattest.ParseErrors(t, func(text string) error { _, err := Parse(text, nil); return err }, ErrInvalid, []parseError{
		{"not JSON", `{"type":`, "not valid JSON"},
		{"not a schema value", `[1,2]`, "a schema is a JSON object or a boolean"},
		{"bad type", `{"type":"strin"}`, "strin"},
		{"bad keyword value", `{"type":"string","maxLength":-1}`, "maxLength"},
		{"unresolved $ref", `{"$ref":"other.json"}`, "other.json"},
		{"remote $ref not fetched", `{"$ref":"https://example.com/x.json"}`, "example.com"},
		{"bad pattern", `{"type":"string","pattern":"("}`, "pattern"},
		{"too deep", strings.Repeat(`{"not":`, 200) + `{}` + strings.Repeat(`}`, 200), "nested too deeply"},
		{"too large", `{"description":"` + strings.Repeat("a", maxSchemaBytes) + `"}`, "too large"},
		{"invalid UTF-8", "{\"description\":\"\xff\"}", "UTF-8"},
	})
}

func TestDrafts(t *testing.T) {
	for _, draft := range []string{
		"http://json-schema.org/draft-04/schema#",
		"http://json-schema.org/draft-06/schema#",
		"http://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft/2019-09/schema",
		"https://json-schema.org/draft/2020-12/schema",
	} {
		t.Run(draft, func(t *testing.T) {
			text := `{"$schema":"` + draft + `","type":"object","properties":{"a":{"type":"string"}}}`
			if _, err := Parse(text, nil); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
}

const addressJSON = `{"type":"object","properties":{"city":{"type":"string"}}}`

func TestReferences(t *testing.T) {
	tests := []struct{ name, schema, ref string }{
		{"relative", `{"type":"object","properties":{"home":{"$ref":"address.json"}}}`, "address.json"},
		{"relative to $id", `{"$id":"https://acme.example/schemas/user.json","type":"object","properties":{"home":{"$ref":"address.json"}}}`, "address.json"},
		{"absolute", `{"type":"object","properties":{"home":{"$ref":"https://acme.example/schemas/address.json"}}}`, "https://acme.example/schemas/address.json"},
		{"with fragment", `{"type":"object","properties":{"home":{"$ref":"defs.json#/definitions/Address"}}}`, "defs.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refText := addressJSON
			if strings.HasPrefix(tt.ref, "defs") {
				refText = `{"definitions":{"Address":` + addressJSON + `}}`
			}
			v1, err := Parse(tt.schema, map[string]string{tt.ref: refText})
			if err != nil {
				t.Fatalf("Parse with reference: %v", err)
			}
			if _, err := Parse(tt.schema, nil); err == nil {
				t.Fatal("Parse without the reference succeeded")
			}
			changed := strings.Replace(refText, `"city":{"type":"string"}`, `"city":{"type":"integer"}`, 1)
			v2, err := Parse(tt.schema, map[string]string{tt.ref: changed})
			if err != nil {
				t.Fatal(err)
			}
			got := Incompatibilities(v2, v1)
			if !compattest.Contains(got, "#/properties/home/properties/city/type") {
				t.Errorf("Incompatibilities = %q, want the change inside the reference", got)
			}
		})
	}
	if _, err := Parse(`{"$ref":"a.json"}`, map[string]string{"a.json": `{"type":`}); err == nil || !strings.Contains(err.Error(), `reference "a.json"`) {
		t.Errorf("broken reference: err = %v, want it named", err)
	}
}

func TestCanonical(t *testing.T) {
	a, err := Parse(`{ "type": "object",
	  "properties": { "b": {"type":"string", "description": "<b> & co"}, "a": {"type":"integer","maximum":1.50} },
	  "required": ["b", "a"] }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{"a":{"maximum":1.50,"type":"integer"},"b":{"description":"<b> & co","type":"string"}},"required":["b","a"],"type":"object"}`
	if a.Canonical() != want {
		t.Errorf("Canonical() = %s, want %s", a.Canonical(), want)
	}
	b, err := Parse(want, nil)
	if err != nil || b.Canonical() != want {
		t.Errorf("canonical form does not round-trip: %v", err)
	}
	// Array order is meaningful and kept.
	c, err := Parse(strings.Replace(want, `["b","a"]`, `["a","b"]`, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Canonical() == want {
		t.Error("reordered required array gave the same canonical form")
	}
}

func TestReferenceLimits(t *testing.T) {
	compattest.ReferenceLimits(t, func(refs map[string]string) error { _, err := Parse("{}", refs); return err }, ErrInvalid)
}
