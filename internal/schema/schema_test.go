package schema

import (
	"errors"
	"testing"
)

func mustParse(t *testing.T, text string) *Schema {
	t.Helper()
	s, err := Parse(Avro, text, nil)
	if err != nil {
		t.Fatalf("Parse(%s): %v", text, err)
	}
	return s
}

func TestCheckLevels(t *testing.T) {
	// History: v1 {a}, then v2 {a, b with a default}.
	v1 := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`)
	v2 := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""}]}`)
	// New field without default: cannot read old data (not backward);
	// old readers ignore it (forward).
	noDefault := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""},{"name":"c","type":"int"}]}`)
	// Drops a: reads old data (a is skipped), but old readers need a.
	dropA := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"b","type":"string","default":""}]}`)
	// b without a default: reads v2 data but not v1's, so only the
	// non-transitive backward checks pass.
	needsB := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`)
	hist := []*Schema{v1, v2}
	for _, tc := range []struct {
		cand  *Schema
		level Level
		ok    bool
	}{
		{noDefault, None, true},
		{noDefault, Backward, false},
		{noDefault, Forward, true},
		{noDefault, Full, false},
		{dropA, Backward, true},
		{dropA, Forward, false},
		{dropA, FullTransitive, false},
		// needsB reads v2 data (b present) but not v1 data (no b, no default).
		{needsB, Backward, true},
		{needsB, BackwardTransitive, false},
		{needsB, Forward, true},
		{needsB, ForwardTransitive, true},
		{needsB, Full, true},
		{needsB, FullTransitive, false},
	} {
		got := Check(tc.level, tc.cand, hist)
		if (len(got) == 0) != tc.ok {
			t.Errorf("%s: compatible=%v, want %v (%v)", tc.level, len(got) == 0, tc.ok, got)
		}
	}
	if got := Check(FullTransitive, noDefault, nil); len(got) != 0 {
		t.Errorf("the first version is always compatible: %v", got)
	}
}

func TestTypesAndLevels(t *testing.T) {
	if ty, err := ParseType(""); err != nil || ty != Avro {
		t.Errorf("ParseType(\"\") = %q, %v; want AVRO", ty, err)
	}
	if ty, err := ParseType("avro"); err != nil || ty != Avro {
		t.Errorf("ParseType(avro) = %q, %v", ty, err)
	}
	if _, err := ParseType("XML"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("ParseType(XML) = %v, want ErrUnknownType", err)
	}
	if _, err := ParseLevel("full_transitive"); err != nil {
		t.Error(err)
	}
	if _, err := ParseLevel("SOMETIMES"); !errors.Is(err, ErrInvalidLevel) {
		t.Errorf("ParseLevel(SOMETIMES) = %v", err)
	}
	if _, err := Parse(Avro, `{"type":"nope"}`, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid schema: %v, want ErrInvalid", err)
	}
}
