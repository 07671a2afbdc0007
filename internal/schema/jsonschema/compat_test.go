package jsonschema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

func obj(props string, extra string) string {
	return `{"type":"object","properties":{` + props + `}` + extra + `}`
}

const closed = `,"additionalProperties":false`

// evolution is a compattest.Case declared here so the table can use unkeyed literals.
type evolution compattest.Case

var compatCases = []evolution{
	{"patternProperties cover an added property", obj(`"a":{"type":"string"}`, `,"patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false`),
		obj(`"a":{"type":"string"},"x_n":{"type":"integer"}`, `,"patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false`), true, true, ""},
	{"patternProperties do not cover an added property", obj(`"a":{"type":"string"}`, `,"patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false`),
		obj(`"a":{"type":"string"},"x_n":{"type":"string"}`, `,"patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false`), false, false, "x_n"},
	{"identical", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, ""), true, true, ""},
	{"key order and spacing only", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{ "properties" : {"a":{"type":"string"}}, "type":"object" }`, true, true, ""},
	{"closed: add optional property", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, closed), true, false,
		`#/properties/b: property "b" removed from a closed content model`},
	{"open: add optional property", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, ""), false, true,
		`#/properties/b: property "b" added to an open content model`},
	{"open: add property with empty schema", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"},"b":{}`, ""), true, true, ""},
	{"open: remove property", obj(`"a":{"type":"string"},"b":{"type":"integer"}`, ""), obj(`"a":{"type":"string"}`, ""), true, false, "added to an open content model"},
	{"closed: remove property", obj(`"a":{"type":"string"},"b":{"type":"integer"}`, closed), obj(`"a":{"type":"string"}`, closed), false, true, "removed from a closed content model"},
	{"partially open covers added property", obj(`"a":{"type":"string"}`, `,"additionalProperties":{"type":"integer"}`),
		obj(`"a":{"type":"string"},"b":{"type":"integer"}`, `,"additionalProperties":{"type":"integer"}`), true, true, ""},
	{"partially open does not cover added property", obj(`"a":{"type":"string"}`, `,"additionalProperties":{"type":"integer"}`),
		obj(`"a":{"type":"string"},"b":{"type":"string"}`, `,"additionalProperties":{"type":"integer"}`), false, false, "not covered"},
	{"closed: add required property", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"},"b":{"type":"integer"}`, closed+`,"required":["b"]`), false, false,
		`#/required/b: property "b" is required by the reader`},
	{"closed: add required property with default", obj(`"a":{"type":"string"}`, closed), obj(`"a":{"type":"string"},"b":{"type":"integer","default":0}`, closed+`,"required":["b"]`), true, false, ""},
	{"make property required", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, `,"required":["a"]`), false, true, "required by the reader"},
	{"property type changed", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"integer"}`, ""), false, false, "#/properties/a/type: type narrowed: writer allows string"},
	{"integer widened to number", obj(`"a":{"type":"integer"}`, ""), obj(`"a":{"type":"number"}`, ""), true, false, "writer allows number"},
	{"type widened to union", `{"type":"string"}`, `{"type":["string","null"]}`, true, false, "writer allows null"},
	{"additionalProperties removed (closed)", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, closed), false, true, "reader closes the content model"},
	{"additionalProperties narrowed to a schema", obj(`"a":{"type":"string"}`, ""), obj(`"a":{"type":"string"}`, `,"additionalProperties":{"type":"string"}`), false, true, "narrows the content model"},
	{"maxLength decreased", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true, "maxLength decreased from 10 to 5"},
	{"maxLength added", `{"type":"string"}`, `{"type":"string","maxLength":5}`, false, true, "reader added maxLength 5"},
	{"minLength increased", `{"type":"string","minLength":1}`, `{"type":"string","minLength":3}`, false, true, "minLength increased from 1 to 3"},
	{"pattern added", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, false, true, "pattern"},
	{"maximum decreased", `{"type":"number","maximum":10}`, `{"type":"number","maximum":9.5}`, false, true, "maximum decreased from 10 to 19/2"},
	{"minimum removed", `{"type":"number","minimum":0}`, `{"type":"number"}`, true, false, "reader added minimum 0"},
	{"exclusiveMinimum increased", `{"type":"number","exclusiveMinimum":0}`, `{"type":"number","exclusiveMinimum":1}`, false, true, "exclusiveMinimum increased"},
	{"multipleOf reduced to a divisor", `{"type":"integer","multipleOf":10}`, `{"type":"integer","multipleOf":5}`, true, false, "multipleOf 10"},
	{"multipleOf changed", `{"type":"integer","multipleOf":10}`, `{"type":"integer","multipleOf":3}`, false, false, "multipleOf"},
	{"enum extended", `{"enum":["a","b"]}`, `{"enum":["a","b","c"]}`, true, false, "enum narrowed: reader lacks c"},
	{"enum added", `{"type":"string"}`, `{"type":"string","enum":["a"]}`, false, true, "reader restricts values to an enum"},
	{"items type changed", `{"type":"array","items":{"type":"string"}}`, `{"type":"array","items":{"type":"integer"}}`, false, false, "#/items/type"},
	{"tuple item added to open tuple", `{"type":"array","items":[{"type":"string"}]}`, `{"type":"array","items":[{"type":"string"},{"type":"integer"}]}`, false, true, "#/items/1"},
	{"tuple item added to closed tuple", `{"type":"array","items":[{"type":"string"}],"additionalItems":false}`,
		`{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}`, true, false, "#/items/1"},
	{"prefixItems (2020-12) changed", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"}],"items":false}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"integer"}],"items":false}`, false, false, "#/items/0/type"},
	{"maxItems decreased", `{"type":"array","maxItems":5}`, `{"type":"array","maxItems":3}`, false, true, "maxItems decreased"},
	{"uniqueItems added", `{"type":"array"}`, `{"type":"array","uniqueItems":true}`, false, true, "uniqueItems"},
	{"oneOf branch added", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`, true, false, "#/oneOf/2: writer branch has no compatible reader branch"},
	{"type to anyOf containing it", `{"type":"string"}`, `{"anyOf":[{"type":"string"},{"type":"null"}]}`, true, false, "#/anyOf/1"},
	{"anyOf to oneOf", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, false, true, "combined type changed from anyOf (writer) to oneOf (reader)"},
	{"allOf branch added", `{"allOf":[{"type":"object"}]}`, `{"allOf":[{"type":"object"},{"required":["a"]}]}`, false, true, "#/allOf/1"},
	{"oneOf branches share parent type", `{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`,
		`{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`, true, true, ""},
	{"nested property change", obj(`"addr":`+obj(`"zip":{"type":"string"}`, ""), ""), obj(`"addr":`+obj(`"zip":{"type":"integer"}`, ""), ""), false, false, "#/properties/addr/properties/zip/type"},
	{"local $ref target changed", `{"type":"object","properties":{"a":{"$ref":"#/definitions/A"}},"definitions":{"A":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/definitions/A"}},"definitions":{"A":{"type":"integer"}}}`, false, false, "#/properties/a/type"},
	{"recursive schema", `{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"v":{"type":"number"},"next":{"$ref":"#"}}}`, true, false, "#/properties/v/type"},
	{"true to string", `true`, `{"type":"string"}`, false, true, "writer allows any type"},
	{"false reader", `{"type":"string"}`, `false`, false, true, "rejects every value"},
	{"not added", `{"type":"string"}`, `{"type":"string","not":{"enum":["x"]}}`, false, true, "reader added \"not\""},
	{"draft-04 schema", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"string"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"string","maxLength":3}}}`, false, true, "maxLength"},
}

func TestIncompatibilities(t *testing.T) {
	format(nil).Run(t, compattest.Table(compatCases))
}

// format gives the shared test helpers this package's functions, parsing with refs.
func format(refs map[string]string) compattest.Format[*Schema] {
	return compattest.New(Parse, refs, (*Schema).Canonical, Incompatibilities)
}

// TestWorkIsBounded compares two wide unions whose branches never match: every writer branch is
// tried against every reader branch, more pairs than the budget allows.
func TestWorkIsBounded(t *testing.T) {
	branches := func(typ string, n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"type":%q,"maxLength":%d,"maximum":%d}`, typ, i+1, i+1)
		}
		return `{"anyOf":[` + strings.Join(parts, ",") + `]}`
	}
	r, err := Parse(branches("string", 400), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Parse(branches("integer", 400), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := Incompatibilities(r, w)
	if !compattest.Contains(got, "too complex") {
		t.Fatalf("got %d messages, first %q; want the budget to run out", len(got), got[0])
	}
}
