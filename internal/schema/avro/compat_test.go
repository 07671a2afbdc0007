package avro

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

func rec(fields string) string {
	return `{"type":"record","name":"User","namespace":"com.acme","fields":[` + fields + `]}`
}

// evolution is a compattest.Case declared here so the table can use unkeyed literals.
type evolution compattest.Case

var compatCases = []evolution{
	{"union branches reordered", rec(`{"name":"n","type":["null","string","int"]}`),
		rec(`{"name":"n","type":["int","null","string"]}`), true, true, ""},
	{"reference to a record promoted inside a map of unions",
		rec(`{"name":"m","type":{"type":"map","values":["null",{"type":"record","name":"V","fields":[{"name":"x","type":"int"}]}]}}`),
		rec(`{"name":"m","type":{"type":"map","values":["null",{"type":"record","name":"V","fields":[{"name":"x","type":"double"}]}]}}`),
		true, false, "/m/values/union[1]"},
	{"identical", rec(`{"name":"id","type":"int"}`), rec(`{"name":"id","type":"int"}`), true, true, ""},
	{"add field with default", rec(`{"name":"id","type":"int"}`),
		rec(`{"name":"id","type":"int"},{"name":"email","type":"string","default":""}`), true, true, ""},
	{"add field without default", rec(`{"name":"id","type":"int"}`),
		rec(`{"name":"id","type":"int"},{"name":"email","type":"string"}`), false, true, "/email: reader field \"email\""},
	{"remove field without default", rec(`{"name":"id","type":"int"},{"name":"email","type":"string"}`),
		rec(`{"name":"id","type":"int"}`), true, false, "email"},
	{"remove field with default", rec(`{"name":"id","type":"int"},{"name":"email","type":"string","default":"x"}`),
		rec(`{"name":"id","type":"int"}`), true, true, ""},
	{"promote int to long", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"long"}`), true, false, "/n: type mismatch: reader int, writer long"},
	{"promote int to float", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"float"}`), true, false, ""},
	{"promote int to double", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"double"}`), true, false, ""},
	{"promote long to float", rec(`{"name":"n","type":"long"}`), rec(`{"name":"n","type":"float"}`), true, false, ""},
	{"promote long to double", rec(`{"name":"n","type":"long"}`), rec(`{"name":"n","type":"double"}`), true, false, ""},
	{"promote float to double", rec(`{"name":"n","type":"float"}`), rec(`{"name":"n","type":"double"}`), true, false, ""},
	{"string and bytes", rec(`{"name":"n","type":"string"}`), rec(`{"name":"n","type":"bytes"}`), true, true, ""},
	{"int to string", rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"string"}`), false, false, "type mismatch"},
	{"boolean to int", rec(`{"name":"n","type":"boolean"}`), rec(`{"name":"n","type":"int"}`), false, false, "type mismatch"},
	{"enum add symbol", rec(`{"name":"c","type":{"type":"enum","name":"Color","symbols":["RED"]}}`),
		rec(`{"name":"c","type":{"type":"enum","name":"Color","symbols":["RED","BLUE"]}}`), true, false, "lacks writer symbols BLUE"},
	{"enum add symbol, old has default", rec(`{"name":"c","type":{"type":"enum","name":"Color","symbols":["RED"],"default":"RED"}}`),
		rec(`{"name":"c","type":{"type":"enum","name":"Color","symbols":["RED","BLUE"],"default":"RED"}}`), true, true, ""},
	{"enum renamed", rec(`{"name":"c","type":{"type":"enum","name":"Color","symbols":["RED"]}}`),
		rec(`{"name":"c","type":{"type":"enum","name":"Colour","symbols":["RED"]}}`), false, false, "name mismatch"},
	{"enum renamed with alias", rec(`{"name":"c","type":{"type":"enum","name":"Color","symbols":["RED"]}}`),
		rec(`{"name":"c","type":{"type":"enum","name":"Colour","aliases":["Color"],"symbols":["RED"]}}`), true, false, "name mismatch"},
	{"fixed size change", rec(`{"name":"h","type":{"type":"fixed","name":"Hash","size":16}}`),
		rec(`{"name":"h","type":{"type":"fixed","name":"Hash","size":32}}`), false, false, "size changed from"},
	{"fixed same size", rec(`{"name":"h","type":{"type":"fixed","name":"Hash","size":16}}`),
		rec(`{"name":"h","type":{"type":"fixed","name":"Hash","size":16}}`), true, true, ""},
	{"field renamed with alias", rec(`{"name":"mail","type":"string"}`),
		rec(`{"name":"email","type":"string","aliases":["mail"]}`), true, false, "\"mail\""},
	{"field renamed without alias", rec(`{"name":"mail","type":"string"}`),
		rec(`{"name":"email","type":"string"}`), false, false, "missing from the writer"},
	{"make field nullable", rec(`{"name":"n","type":"string"}`),
		rec(`{"name":"n","type":["null","string"],"default":null}`), true, false, "union[0]"},
	{"add union branch", rec(`{"name":"n","type":["null","string"]}`),
		rec(`{"name":"n","type":["null","string","int"]}`), true, false, "writer union branch int"},
	{"union branch promoted", rec(`{"name":"n","type":["null","int"]}`),
		rec(`{"name":"n","type":["null","long"]}`), true, false, "writer union branch long"},
	{"union to incompatible type", rec(`{"name":"n","type":["null","string"]}`),
		rec(`{"name":"n","type":"int"}`), false, false, "not readable by any branch"},
	{"array items promoted", rec(`{"name":"a","type":{"type":"array","items":"int"}}`),
		rec(`{"name":"a","type":{"type":"array","items":"long"}}`), true, false, "/a/items: type mismatch"},
	{"map values changed", rec(`{"name":"m","type":{"type":"map","values":"int"}}`),
		rec(`{"name":"m","type":{"type":"map","values":"boolean"}}`), false, false, "/m/values"},
	{"array to map", rec(`{"name":"a","type":{"type":"array","items":"int"}}`),
		rec(`{"name":"a","type":{"type":"map","values":"int"}}`), false, false, "type mismatch"},
	{"record renamed", `{"type":"record","name":"A","fields":[]}`, `{"type":"record","name":"B","fields":[]}`, false, false, "name mismatch"},
	{"record renamed with alias", `{"type":"record","name":"A","fields":[]}`,
		`{"type":"record","name":"B","aliases":["A"],"fields":[]}`, true, false, "name mismatch"},
	{"namespace change only", `{"type":"record","name":"A","namespace":"x","fields":[]}`,
		`{"type":"record","name":"A","namespace":"y","fields":[]}`, true, true, ""},
	{"nested record field added without default",
		rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}`),
		rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}}`),
		false, true, "/addr/zip"},
	{"recursive type unchanged",
		`{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`,
		`{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`, true, true, ""},
	{"recursive type promoted",
		`{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`,
		`{"type":"record","name":"Node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"]}]}`, true, false, "/v: type mismatch"},
	{"primitive top level", `"int"`, `"long"`, true, false, "/: type mismatch"},
	{"two problems reported",
		rec(`{"name":"a","type":"int"},{"name":"b","type":"int"}`),
		rec(`{"name":"a","type":"string"},{"name":"b","type":"boolean"}`), false, false, "/b: type mismatch"},
}

func TestIncompatibilities(t *testing.T) {
	format(nil).Run(t, compattest.Table(compatCases))
}

// format gives the shared test helpers this package's functions, parsing with refs.
func format(refs map[string]string) compattest.Format[*Schema] {
	return compattest.New(Parse, refs, (*Schema).Canonical, Incompatibilities)
}

func TestTwoProblemsAreTwoMessages(t *testing.T) {
	old, _ := Parse(rec(`{"name":"a","type":"int"},{"name":"b","type":"int"}`), nil)
	nw, _ := Parse(rec(`{"name":"a","type":"string"},{"name":"b","type":"boolean"},{"name":"c","type":"int"}`), nil)
	got := Incompatibilities(nw, old)
	if len(got) != 3 {
		t.Fatalf("got %d messages %q, want 3 (a, b, c)", len(got), got)
	}
	for i, p := range []string{"/a:", "/b:", "/c:"} {
		if !strings.HasPrefix(got[i], p) {
			t.Errorf("message %d = %q, want prefix %q", i, got[i], p)
		}
	}
}

// TestWorkIsBounded compares two wide unions of records that never match: every writer branch is
// tried against every reader branch, more pairs than the budget allows.
func TestWorkIsBounded(t *testing.T) {
	union := func(prefix, typ string, n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"type":"record","name":"%s%d","fields":[{"name":"f","type":%q}]}`, prefix, i, typ)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	r, err := Parse(union("A", "int", 400), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Parse(union("B", "string", 400), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := Incompatibilities(r, w)
	if !compattest.Contains(got, "too complex") {
		t.Fatalf("got %d messages, first %q; want the budget to run out", len(got), got[0])
	}
}
