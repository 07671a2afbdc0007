package avro

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

// FuzzParse checks that Parse never panics or hangs, and that whatever it accepts has a canonical
// form that parses again to the same form and is compatible with itself.
func FuzzParse(f *testing.F) {
	compattest.Seed(f, "testdata/*.avsc", cases())
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text, map[string]string{"com.acme.Address": addressSchema})
		if err != nil {
			return
		}
		again, err := Parse(s.Canonical(), nil)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", s.Canonical(), err)
		}
		if again.Canonical() != s.Canonical() {
			t.Fatalf("canonical form not stable:\n%s\n%s", s.Canonical(), again.Canonical())
		}
		if got := Incompatibilities(s, again); len(got) != 0 {
			t.Fatalf("schema incompatible with itself: %q", got)
		}
	})
}
