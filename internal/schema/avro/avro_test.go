package avro

import "testing"

func TestParseAndCompatibility(t *testing.T) {
	v1, err := Parse(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := Parse(`{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := Parse(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"c","type":"string"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := Incompatibilities(v2, v1); len(got) != 0 {
		t.Errorf("v2 reading v1 (new field with default): %v", got)
	}
	if got := Incompatibilities(v3, v1); len(got) == 0 {
		t.Error("v3 reading v1: a new field without default must be incompatible")
	}
	same, _ := Parse("{\"type\":\"record\",\n \"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}", nil)
	if same.Canonical() != v1.Canonical() {
		t.Errorf("canonical forms differ: %q vs %q", same.Canonical(), v1.Canonical())
	}
	for _, bad := range []string{``, `{`, `{"type":"record","name":"R"}`, `{"type":"nope"}`} {
		if _, err := Parse(bad, nil); err == nil {
			t.Errorf("Parse(%q) accepted an invalid schema", bad)
		}
	}
	withRef, err := Parse(`{"type":"record","name":"Outer","fields":[{"name":"r","type":"R"}]}`,
		map[string]string{"R": `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`})
	if err != nil || withRef == nil {
		t.Fatalf("schema with a reference: %v", err)
	}
	if _, err := Parse(`{"type":"record","name":"Outer","fields":[{"name":"r","type":"R"}]}`, nil); err == nil {
		t.Error("an unresolved named type must be invalid")
	}
}
