package protobuf

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

// FuzzParse checks that Parse never panics or hangs, and that whatever it accepts renders to a
// canonical form that compiles to the same form and is compatible with itself.
func FuzzParse(f *testing.F) {
	compattest.Seed(f, "testdata/*.proto", cases())
	refs := map[string]string{"acme/common/address.proto": addressProto}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text, refs)
		if err != nil {
			return
		}
		again, err := Parse(s.Canonical(), refs)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, s.Canonical())
		}
		if again.Canonical() != s.Canonical() {
			t.Fatalf("canonical form not stable:\n%s\n%s", s.Canonical(), again.Canonical())
		}
		if got := Incompatibilities(s, again); len(got) != 0 {
			t.Fatalf("schema incompatible with itself: %q", got)
		}
	})
}
