package protobuf

import (
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

type parseError compattest.ParseError

func TestParseErrors(t *testing.T) {
	compattest.ParseErrors(t, func(text string) error { _, err := Parse(text, nil); return err }, ErrInvalid, []parseError{
		{"syntax error", `syntax = "proto3"; message U { int32 = 1; }`, "schema.proto:1"},
		{"unknown type", p3(`message U { Missing m = 1; }`), "Missing"},
		{"duplicate field number", p3(`message U { int32 a = 1; int32 b = 1; }`), "1"},
		{"missing import", p3(`import "acme/other.proto"; message U { int32 a = 1; }`), "acme/other.proto"},
		{"too deep", p3(strings.Repeat("message M { ", 100) + strings.Repeat("} ", 100)), "nested too deeply"},
		{"too large", p3(`message U { int32 a = 1; }` + strings.Repeat(" ", maxSchemaBytes)), "too large"},
		{"invalid UTF-8", p3("message U { int32 a = 1; } // \xff"), "UTF-8"},
	})
}

const addressProto = `syntax = "proto3";
package acme.common;
message Address { string city = 1; }
`

func TestReferencesAndWellKnownImports(t *testing.T) {
	user := p3(`import "acme/common/address.proto";
import "google/protobuf/timestamp.proto";
message User {
  acme.common.Address home = 1;
  google.protobuf.Timestamp created = 2;
}`)
	refs := map[string]string{"acme/common/address.proto": addressProto}
	v1, err := Parse(user, refs)
	if err != nil {
		t.Fatalf("Parse with reference: %v", err)
	}
	if _, err := Parse(user, nil); err == nil {
		t.Fatal("Parse without the reference succeeded")
	}

	// A change inside the imported message is found through the field that uses it.
	changed := map[string]string{"acme/common/address.proto": strings.Replace(addressProto, "string city", "int32 city", 1)}
	v2, err := Parse(user, changed)
	if err != nil {
		t.Fatal(err)
	}
	got := Incompatibilities(v2, v1)
	if !compattest.Contains(got, "#/Address/1: field city changed type from string (writer) to int32 (reader)") {
		t.Errorf("Incompatibilities = %q, want the change in the imported Address", got)
	}

	// A broken reference is reported with its name.
	_, err = Parse(user, map[string]string{"acme/common/address.proto": "message {"})
	if err == nil || !strings.Contains(err.Error(), "acme/common/address.proto") {
		t.Errorf("broken reference: err = %v, want it named", err)
	}
	if _, err := Parse(user, map[string]string{mainFile: addressProto}); err == nil {
		t.Error("reference named like the main file accepted")
	}
}

func TestCanonical(t *testing.T) {
	a, err := Parse(`syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
import "google/protobuf/any.proto";
// A user.
message User {
  int32 id = 1;   // the id
  google.protobuf.Timestamp created = 2 [deprecated=true];
  map<string,int32> counts = 3;
  optional string nick = 4;
  oneof contact { string email = 5; string phone = 6; }
  google.protobuf.Any extra = 7;
}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `syntax = "proto3";
package acme;
import "google/protobuf/any.proto";
import "google/protobuf/timestamp.proto";
message User {
  int32 id = 1;
  .google.protobuf.Timestamp created = 2 [deprecated = true];
  map<string, int32> counts = 3;
  optional string nick = 4;
  oneof contact {
    string email = 5;
    string phone = 6;
  }
  .google.protobuf.Any extra = 7;
}
`
	if a.Canonical() != want {
		t.Errorf("Canonical() =\n%s\nwant\n%s", a.Canonical(), want)
	}
	b, err := Parse(want, nil)
	if err != nil {
		t.Fatalf("canonical form does not parse: %v", err)
	}
	if b.Canonical() != want {
		t.Errorf("canonical form not stable:\n%s", b.Canonical())
	}
	c, err := Parse(strings.Replace(want, "int32 id = 1", "int64 id = 1", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Canonical() == want {
		t.Error("a type change kept the canonical form")
	}
}

func TestImportedClosedEnum(t *testing.T) {
	const user = `syntax = "proto2";
package acme;
import "acme/color.proto";
message U { optional acme.common.Color c = 1; }`
	v1, err := Parse(user, map[string]string{"acme/color.proto": `syntax = "proto2"; package acme.common; enum Color { RED = 0; BLUE = 1; }`})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := Parse(user, map[string]string{"acme/color.proto": `syntax = "proto2"; package acme.common; enum Color { RED = 0; }`})
	if err != nil {
		t.Fatal(err)
	}
	if got := Incompatibilities(v2, v1); !compattest.Contains(got, "#/Color: closed enum value BLUE = 1 removed") {
		t.Errorf("Incompatibilities(v2, v1) = %q, want the removed value of the imported enum", got)
	}
	if got := Incompatibilities(v1, v2); len(got) != 0 {
		t.Errorf("Incompatibilities(v1, v2) = %q, want compatible", got)
	}
}

func TestReferenceLimits(t *testing.T) {
	compattest.ReferenceLimits(t, func(refs map[string]string) error { _, err := Parse("{}", refs); return err }, ErrInvalid)
}
