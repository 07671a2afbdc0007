// Package compattest holds the test helpers shared by the schema format packages (avro,
// protobuf, jsonschema): a runner for evolution tables checked in both directions, and fuzz
// seeding from testdata. Only tests import it.
package compattest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Case evolves Old into New. Backward: New (reader) reads data written with Old; Forward: Old
// (reader) reads data written with New. Want, when set, must appear in one of the messages.
type Case struct {
	Name              string
	Old, New          string
	Backward, Forward bool
	Want              string
}

// Run parses both schemas of every case and checks Incompatibilities in both directions.
func Run[S any](t *testing.T, cases []Case, parse func(string) (S, error), incompatibilities func(reader, writer S) []string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			old, err := parse(tc.Old)
			if err != nil {
				t.Fatalf("parse old: %v", err)
			}
			nw, err := parse(tc.New)
			if err != nil {
				t.Fatalf("parse new: %v", err)
			}
			backward := incompatibilities(nw, old)
			forward := incompatibilities(old, nw)
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

// Contains reports whether one of msgs contains want.
func Contains(msgs []string, want string) bool {
	for _, m := range msgs {
		if strings.Contains(m, want) {
			return true
		}
	}
	return false
}

// Seed adds the files matching pattern and the Old schema of every case to the fuzz corpus.
func Seed(f *testing.F, pattern string, cases []Case) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, tc := range cases {
		f.Add(tc.Old)
		f.Add(tc.New)
	}
}
