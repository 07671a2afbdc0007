package avro

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

// FuzzParse checks that Parse never panics or hangs, and that whatever it accepts has a canonical
// form that parses again to the same form and is compatible with itself.
func FuzzParse(f *testing.F) {
	format(map[string]string{"com.acme.Address": addressSchema}).Fuzz(f, "testdata/*.avsc", compattest.Table(compatCases))
}

// TestTestdata checks the round trip of every testdata schema (the fuzz seeds).
func TestTestdata(t *testing.T) {
	format(map[string]string{"com.acme.Address": addressSchema}).Testdata(t, "testdata/*.avsc")
}
