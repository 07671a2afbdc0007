// Package compattest holds the test helpers shared by the schema format packages (avro,
// protobuf, jsonschema): a runner for evolution tables checked in both directions, the canonical
// round-trip check used by tests and fuzz targets, fuzz seeding from testdata, and the checks of
// parse errors and reference limits. Only tests import it.
package compattest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/limits"
)

// Case evolves Old into New. Backward: New (reader) reads data written with Old; Forward: Old
// (reader) reads data written with New. Want, when set, must appear in one of the messages.
type Case struct {
	Name              string
	Old, New          string
	Backward, Forward bool
	Want              string
}

// Table converts a package's own case type, declared as "type evolution compattest.Case" so that
// its table may use unkeyed literals.
func Table[C ~struct {
	Name              string
	Old, New          string
	Backward, Forward bool
	Want              string
}](cases []C) []Case {
	out := make([]Case, len(cases))
	for i, c := range cases {
		out[i] = Case(c)
	}
	return out
}

// Format is what the helpers need of a format package.
type Format[S any] struct {
	Parse             func(text string) (S, error)
	Canonical         func(S) string
	Incompatibilities func(reader, writer S) []string
}

// New builds a Format from a package's Parse, parsing with refs.
func New[S any](parse func(string, map[string]string) (S, error), refs map[string]string, canonical func(S) string, incompatibilities func(reader, writer S) []string) Format[S] {
	return Format[S]{
		Parse:             func(text string) (S, error) { return parse(text, refs) },
		Canonical:         canonical,
		Incompatibilities: incompatibilities,
	}
}

// Run parses both schemas of every case and checks Incompatibilities in both directions.
func (f Format[S]) Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			old, err := f.Parse(tc.Old)
			if err != nil {
				t.Fatalf("parse old: %v", err)
			}
			nw, err := f.Parse(tc.New)
			if err != nil {
				t.Fatalf("parse new: %v", err)
			}
			backward := f.Incompatibilities(nw, old)
			forward := f.Incompatibilities(old, nw)
			if (len(backward) == 0) != tc.Backward {
				t.Errorf("backward (new reads old): got %q, want compatible=%v", backward, tc.Backward)
			}
			if (len(forward) == 0) != tc.Forward {
				t.Errorf("forward (old reads new): got %q, want compatible=%v", forward, tc.Forward)
			}
			if tc.Want != "" && !Contains(append(backward, forward...), tc.Want) {
				t.Errorf("no message contains %q: backward %q, forward %q", tc.Want, backward, forward)
			}
		})
	}
}

// RoundTrip checks that the canonical form of s parses to the same canonical form and that the
// two are compatible both ways.
func (f Format[S]) RoundTrip(s S) error {
	again, err := f.Parse(f.Canonical(s))
	if err != nil {
		return fmt.Errorf("canonical form does not parse: %v\n%s", err, f.Canonical(s))
	}
	if f.Canonical(again) != f.Canonical(s) {
		return fmt.Errorf("canonical form not stable:\n%s\n%s", f.Canonical(s), f.Canonical(again))
	}
	if got := append(f.Incompatibilities(s, again), f.Incompatibilities(again, s)...); len(got) != 0 {
		return fmt.Errorf("schema incompatible with itself: %q", got)
	}
	return nil
}

// Testdata parses every file matching pattern and checks its round trip.
func (f Format[S]) Testdata(t *testing.T, pattern string) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata matches %s: %v", pattern, err)
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.Parse(string(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.RoundTrip(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Fuzz seeds the corpus with the files matching pattern and both schemas of every case, then
// checks that whatever Parse accepts round-trips. Parse must never panic or hang.
func (f Format[S]) Fuzz(fz *testing.F, pattern string, cases []Case) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		fz.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			fz.Fatal(err)
		}
		fz.Add(string(b))
	}
	for _, tc := range cases {
		fz.Add(tc.Old)
		fz.Add(tc.New)
	}
	fz.Fuzz(func(t *testing.T, text string) {
		s, err := f.Parse(text)
		if err != nil {
			return
		}
		if err := f.RoundTrip(s); err != nil {
			t.Fatal(err)
		}
	})
}

// Contains reports whether one of msgs contains want.
func Contains(msgs []string, want string) bool {
	for _, m := range msgs {
		if strings.Contains(m, want) {
			return true
		}
	}
	return false
}

// ParseError is text that Parse must refuse with an error containing Want.
type ParseError struct{ Name, Text, Want string }

// ParseErrors checks that parse refuses every case with an error wrapping errInvalid (the
// package's ErrInvalid) and containing the case's Want. A package declares its case type as
// "type parseError compattest.ParseError" so that its table may use unkeyed literals.
func ParseErrors[C ~struct{ Name, Text, Want string }](t *testing.T, parse func(text string) error, errInvalid error, cases []C) {
	t.Helper()
	for _, c := range cases {
		tc := ParseError(c)
		t.Run(tc.Name, func(t *testing.T) {
			err := parse(tc.Text)
			if err == nil {
				t.Fatal("Parse succeeded, want error")
			}
			if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tc.Want) {
				t.Fatalf("Parse error %q, want %v containing %q", err, errInvalid, tc.Want)
			}
		})
	}
}

// ReferenceLimits checks that parse refuses more references than limits.MaxRefs, and
// references totalling more than limits.MaxRefBytes, with an error wrapping errInvalid.
func ReferenceLimits(t *testing.T, parse func(refs map[string]string) error, errInvalid error) {
	t.Helper()
	many := map[string]string{}
	for i := 0; i <= limits.MaxRefs; i++ {
		many[fmt.Sprintf("r%d", i)] = "{}"
	}
	half := strings.Repeat(" ", limits.MaxRefBytes/2+1)
	big := map[string]string{"a": half, "b": half}
	for name, refs := range map[string]map[string]string{"too many": many, "too large in total": big} {
		if err := parse(refs); !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "references") {
			t.Errorf("%s: err = %v, want %v about references", name, err, errInvalid)
		}
	}
}
