package avro

import (
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

type parseError compattest.ParseError

func TestParseErrors(t *testing.T) {
	compattest.ParseErrors(t, func(text string) error { _, err := Parse(text, nil); return err }, ErrInvalid, []parseError{
		{"not JSON", `{"type":`, "not valid JSON"},
		{"unknown type", `"integer"`, "unknown type"},
		{"record without name", `{"type":"record","fields":[]}`, "name"},
		{"bad default", `{"type":"record","name":"A","fields":[{"name":"a","type":"int","default":"x"}]}`, "default"},
		{"duplicate enum symbol", `{"type":"enum","name":"E","symbols":["A","A"]}`, "duplicate"},
		{"undefined reference", `{"type":"record","name":"A","fields":[{"name":"a","type":"com.acme.Missing"}]}`, "unknown type"},
		{"null namespace inside a namespace", `{"type":"record","name":"A","namespace":"x","fields":[{"name":"e","type":{"type":"enum","name":".E","symbols":["S"]}}]}`, "null namespace"},
		{"invalid UTF-8", "\"\xff\"", "UTF-8"},
		{"too deep", strings.Repeat("[", 200) + strings.Repeat("]", 200), "nested too deeply"},
		{"too large", `"` + strings.Repeat("a", maxSchemaBytes) + `"`, "too large"},
	})
}

const addressSchema = `{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]}`
const countrySchema = `{"type":"enum","name":"Country","namespace":"com.acme","symbols":["FR","DE"]}`
const addressWithCountry = `{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"},{"name":"country","type":"Country"}]}`

func TestReferences(t *testing.T) {
	user := `{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"home","type":"Address"},{"name":"work","type":["null","com.acme.Address"],"default":null}]}`
	if _, err := Parse(user, nil); err == nil {
		t.Fatal("Parse without the reference succeeded")
	}
	s, err := Parse(user, map[string]string{"com.acme.Address": addressSchema})
	if err != nil {
		t.Fatalf("Parse with reference: %v", err)
	}
	if !strings.Contains(s.Canonical(), `"name":"city"`) {
		t.Errorf("canonical form does not resolve the reference: %s", s.Canonical())
	}

	// References that depend on each other are resolved whatever the map order.
	refs := map[string]string{"com.acme.Address": addressWithCountry, "com.acme.Country": countrySchema}
	s2, err := Parse(user, refs)
	if err != nil {
		t.Fatalf("Parse with chained references: %v", err)
	}

	// A change inside a referenced type is seen by the compatibility check.
	got := Incompatibilities(s2, s)
	if !compattest.Contains(got, "/home/country") {
		t.Errorf("Incompatibilities(with country, without) = %q, want a message about /home/country", got)
	}
	if got := Incompatibilities(s, s2); len(got) != 0 {
		t.Errorf("old reader of new data: %q, want compatible", got)
	}

	if _, err := Parse(user, map[string]string{"com.acme.Address": `{"type":`}); err == nil ||
		!strings.Contains(err.Error(), `reference "com.acme.Address"`) {
		t.Errorf("bad reference text: err = %v, want it named", err)
	}
}

func TestCanonical(t *testing.T) {
	a, err := Parse(`{ "type" : "record", "namespace":"x", "name" : "A", "fields" : [ {"type":"int","name":"n","default":1} ] }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(`{"name":"x.A","type":"record","fields":[{"name":"n","type":"int","default":1}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Canonical() != b.Canonical() {
		t.Errorf("same schema, different canonical forms:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	want := `{"name":"x.A","type":"record","fields":[{"name":"n","type":"int","default":1}]}`
	if a.Canonical() != want {
		t.Errorf("Canonical() = %s, want %s", a.Canonical(), want)
	}
	// Defaults, aliases and doc are kept: changing them is a new schema.
	for _, other := range []string{
		`{"name":"x.A","type":"record","fields":[{"name":"n","type":"int","default":2}]}`,
		`{"name":"x.A","type":"record","fields":[{"name":"n","type":"int","default":1,"aliases":["m"]}]}`,
		`{"name":"x.A","type":"record","doc":"d","fields":[{"name":"n","type":"int","default":1}]}`,
	} {
		c, err := Parse(other, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Canonical() == a.Canonical() {
			t.Errorf("%s has the same canonical form as %s", other, want)
		}
	}
	// The canonical form parses back to itself.
	again, err := Parse(a.Canonical(), nil)
	if err != nil || again.Canonical() != a.Canonical() {
		t.Errorf("canonical form does not round-trip: %v %v", err, again)
	}
}

func TestReferenceLimits(t *testing.T) {
	compattest.ReferenceLimits(t, func(refs map[string]string) error { _, err := Parse("{}", refs); return err }, ErrInvalid)
}
