package protobuf

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/schema/compattest"
)

func p3(body string) string { return "syntax = \"proto3\";\npackage acme;\n" + body }
func p2(body string) string { return "syntax = \"proto2\";\npackage acme;\n" + body }

// evolution is a compattest.Case declared here so the table can use unkeyed literals.
type evolution compattest.Case

var compatCases = []evolution{
	{"map key type changed", p3(`message U { map<int32, string> m = 1; }`), p3(`message U { map<string, string> m = 1; }`), false, false, "#/U/1/key"},
	{"proto3 optional added to a field", p3(`message U { int32 n = 1; }`), p3(`message U { optional int32 n = 1; }`), true, true, ""},
	{"field moved out of a oneof", p3(`message U { oneof o { int32 a = 1; string b = 2; } }`), p3(`message U { int32 a = 1; oneof o { string b = 2; } }`), false, false,
		"field a removed from oneof o"},
	{"identical", p3(`message U { int32 id = 1; }`), p3(`message U { int32 id = 1; }`), true, true, ""},
	{"comments and layout only", p3(`message U { int32 id = 1; }`), p3("// c\nmessage   U {\n  int32 id = 1; // id\n}\n"), true, true, ""},
	{"add field", p3(`message U { int32 id = 1; }`), p3(`message U { int32 id = 1; string name = 2; }`), true, true, ""},
	{"remove field", p3(`message U { int32 id = 1; string name = 2; }`), p3(`message U { int32 id = 1; reserved 2; }`), true, true, ""},
	{"rename field keeping number", p3(`message U { int32 id = 1; }`), p3(`message U { int32 user_id = 1; }`), true, true, ""},
	{"int32 to string", p3(`message U { int32 id = 1; }`), p3(`message U { string id = 1; }`), false, false,
		"#/U/1: field id changed type from int32 (writer) to string (reader)"},
	{"int32 to int64 (same varint group)", p3(`message U { int32 n = 1; }`), p3(`message U { int64 n = 1; }`), true, true, ""},
	{"uint64 to bool", p3(`message U { uint64 n = 1; }`), p3(`message U { bool n = 1; }`), true, true, ""},
	{"int32 to sint32 (zigzag)", p3(`message U { int32 n = 1; }`), p3(`message U { sint32 n = 1; }`), false, false, "not wire-compatible"},
	{"fixed32 to sfixed32", p3(`message U { fixed32 n = 1; }`), p3(`message U { sfixed32 n = 1; }`), true, true, ""},
	{"fixed32 to fixed64", p3(`message U { fixed32 n = 1; }`), p3(`message U { fixed64 n = 1; }`), false, false, "not wire-compatible"},
	{"float to double", p3(`message U { float n = 1; }`), p3(`message U { double n = 1; }`), false, false, "not wire-compatible"},
	{"string to bytes", p3(`message U { string s = 1; }`), p3(`message U { bytes s = 1; }`), true, true, ""},
	{"enum to int32", p3(`enum E { A = 0; } message U { E e = 1; }`), p3(`enum E { A = 0; } message U { int32 e = 1; }`), true, true, ""},
	{"scalar to message", p3(`message U { int32 a = 1; } message V { int32 x = 1; }`), p3(`message U { V a = 1; } message V { int32 x = 1; }`), false, false, "changed kind from scalar int32"},
	{"field number reused with another type",
		p3(`message U { int32 id = 1; string name = 2; }`), p3(`message U { int32 id = 1; int64 count = 2; }`), false, false, "#/U/2: field name changed type"},
	{"field renumbered", p3(`message U { int32 id = 1; string name = 2; }`), p3(`message U { int32 id = 1; string name = 3; }`), false, false,
		"field name renumbered from 2 (writer) to 3 (reader)"},
	{"fields swapped numbers", p3(`message U { int32 a = 1; int32 b = 2; }`), p3(`message U { int32 a = 2; int32 b = 1; }`), false, false, "renumbered"},
	{"numeric repeated to singular", p3(`message U { repeated int32 n = 1; }`), p3(`message U { int32 n = 1; }`), false, false, "between repeated and singular"},
	{"string repeated to singular", p3(`message U { repeated string s = 1; }`), p3(`message U { string s = 1; }`), true, true, ""},
	{"message type changed", p3(`message U { A a = 1; } message A { int32 x = 1; } message B { int32 x = 1; }`),
		p3(`message U { B a = 1; } message A { int32 x = 1; } message B { int32 x = 1; }`), false, false, "changed message type from .acme.A"},
	{"nested message field type changed", p3(`message U { message In { int32 x = 1; } In in = 1; }`),
		p3(`message U { message In { string x = 1; } In in = 1; }`), false, false, "#/U.In/1"},
	{"message removed", p3(`message U { int32 id = 1; } message V { int32 x = 1; }`), p3(`message U { int32 id = 1; }`), false, true, "message V removed"},
	{"first message removed", p3(`message U { int32 id = 1; } message V { int32 x = 1; }`), p3(`message V { int32 x = 1; }`), false, true,
		"first message (the schema's default message type) U removed"},
	{"message renamed", p3(`message U { int32 id = 1; }`), p3(`message User { int32 id = 1; }`), false, false, "U removed"},
	{"messages reordered", p3(`message U { int32 id = 1; } message V { int32 x = 1; }`), p3(`message V { int32 x = 1; } message U { int32 id = 1; }`), true, true, ""},
	{"message added", p3(`message U { int32 id = 1; }`), p3(`message U { int32 id = 1; } message V { int32 x = 1; }`), true, false, ""},
	{"package changed", p3(`message U { int32 id = 1; }`), "syntax = \"proto3\";\npackage other;\nmessage U { int32 id = 1; }", false, false, "package changed"},
	{"syntax changed", p2(`message U { optional int32 id = 1; }`), p3(`message U { optional int32 id = 1; }`), false, false, "syntax changed from proto2 (writer) to proto3 (reader)"},
	{"required field added", p2(`message U { optional int32 id = 1; }`), p2(`message U { optional int32 id = 1; required int32 n = 2; }`), false, false, "required field n added"},
	{"optional made required", p2(`message U { optional int32 id = 1; }`), p2(`message U { required int32 id = 1; }`), false, true, "field id became required"},
	{"optional field removed (proto2)", p2(`message U { optional int32 id = 1; optional int32 n = 2; }`), p2(`message U { optional int32 id = 1; }`), true, true, ""},
	{"field moved into new oneof", p3(`message U { int32 a = 1; }`), p3(`message U { oneof o { int32 a = 1; } }`), true, true, ""},
	{"two fields moved into oneof", p3(`message U { int32 a = 1; int32 b = 2; }`), p3(`message U { oneof o { int32 a = 1; int32 b = 2; } }`), false, true,
		"2 fields moved into oneof o"},
	{"field moved into existing oneof", p3(`message U { int32 a = 1; oneof o { int32 b = 2; } }`), p3(`message U { oneof o { int32 a = 1; int32 b = 2; } }`), false, false,
		"moved into the existing oneof o"},
	{"oneof field added", p3(`message U { oneof o { int32 a = 1; } }`), p3(`message U { oneof o { int32 a = 1; string b = 2; } }`), true, false,
		"field b removed from oneof o"},
	{"closed enum value removed", p2(`enum E { A = 0; B = 1; } message U { optional E e = 1; }`), p2(`enum E { A = 0; } message U { optional E e = 1; }`), false, true,
		"closed enum value B = 1 removed"},
	{"open enum value removed", p3(`enum E { A = 0; B = 1; } message U { E e = 1; }`), p3(`enum E { A = 0; } message U { E e = 1; }`), true, true, ""},
	{"map value type changed", p3(`message U { map<string, int32> m = 1; }`), p3(`message U { map<string, string> m = 1; }`), false, false, "#/U/1/value"},
	{"map to repeated message", p3(`message U { map<string, int32> m = 1; }`), p3(`message U { message E { string key = 1; int32 value = 2; } repeated E m = 1; }`), false, false, "changed kind from map"},
	{"recursive message", p3(`message N { int32 v = 1; N next = 2; }`), p3(`message N { int64 v = 1; N next = 2; }`), true, true, ""},
	{"recursive message broken", p3(`message N { int32 v = 1; N next = 2; }`), p3(`message N { string v = 1; N next = 2; }`), false, false, "#/N/1"},
}

func TestIncompatibilities(t *testing.T) {
	format(nil).Run(t, compattest.Table(compatCases))
}

// format gives the shared test helpers this package's functions, parsing with refs.
func format(refs map[string]string) compattest.Format[*Schema] {
	return compattest.New(Parse, refs, (*Schema).Canonical, Incompatibilities)
}
