package registry

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestRESTConformance walks Confluent's REST API over plain HTTP, step by
// step on one registry, checking status codes, error codes and bodies.
func TestRESTConformance(t *testing.T) {
	b := testbroker.Start(t)
	base := "http://" + b.RegistryAddr()
	outer := `{"type":"record","name":"Outer","namespace":"t","fields":[{"name":"u","type":"t.User"}]}`
	userRef := []map[string]any{{"name": "t.User", "subject": "ref-user", "version": 1}}
	steps := []struct {
		method, path string
		body         any
		status, code int    // code: the error_code; 0 for a success
		want         string // the exact body, when set
		contains     string // a part of the body, when set
	}{
		{"GET", "/", nil, 200, 0, `{}`, ""},
		{"GET", "/schemas/types", nil, 200, 0, `["JSON","PROTOBUF","AVRO"]`, ""},
		{"GET", "/subjects", nil, 200, 0, `[]`, ""},
		{"GET", "/subjects/s/versions", nil, 404, 40401, "", ""},
		{"GET", "/schemas/ids/99", nil, 404, 40403, "", ""},
		{"POST", "/subjects/s/versions", schemaBody(`{"type":"nope"}`), 422, 42201, "", ""},
		{"POST", "/subjects/s/versions", map[string]any{"schema": userV1, "schemaType": "XML"}, 422, 42201, "", ""},
		{"POST", "/subjects/s/versions", map[string]any{"schema": ""}, 422, 42201, "", ""},
		{"POST", "/subjects/s/versions", "{not json", 400, 400, "", ""},
		{"POST", "/subjects/s/versions", `{"schema": 5}`, 400, 400, "", ""},
		{"POST", "/subjects/s/versions", schemaBody(userV1), 200, 0, `{"id":1}`, ""},
		{"POST", "/subjects/s/versions", map[string]any{"schema": userV1, "schemaType": "AVRO"}, 200, 0, `{"id":1}`, ""},
		{"POST", "/subjects/s/versions", map[string]any{"schema": userV1, "references": []any{}}, 200, 0, `{"id":1}`, ""},
		{"POST", "/subjects/s/versions", schemaBody(userV2), 200, 0, `{"id":2}`, ""},
		{"POST", "/subjects/s/versions", schemaBody(userBad), 409, 409, "", ""},
		{"POST", "/subjects/s/versions", map[string]any{"schema": userV2, "id": 7}, 422, 42205, "", ""},
		{"GET", "/subjects/s/versions", nil, 200, 0, `[1,2]`, ""},
		{"GET", "/subjects/s/versions/abc", nil, 422, 42202, "", ""},
		{"GET", "/subjects/s/versions/0", nil, 422, 42202, "", ""},
		{"GET", "/subjects/s/versions/3", nil, 404, 40402, "", ""},
		{"GET", "/subjects/s/versions/1", nil, 200, 0, `{"subject":"s","id":1,"version":1,"schema":` + jsonString(userV1) + `}`, ""},
		{"GET", "/subjects/s/versions/latest", nil, 200, 0, "", `"version":2`},
		{"GET", "/subjects/s/versions/-1", nil, 200, 0, "", `"id":2`},
		{"GET", "/subjects/s/versions/1/schema", nil, 200, 0, userV1, ""},
		{"GET", "/schemas/ids/1", nil, 200, 0, `{"schema":` + jsonString(userV1) + `}`, ""},
		{"GET", "/schemas/ids/1/schema", nil, 200, 0, userV1, ""},
		{"GET", "/schemas/ids/2/subjects", nil, 200, 0, `["s"]`, ""},
		{"GET", "/schemas/ids/2/versions", nil, 200, 0, `[{"subject":"s","version":2}]`, ""},
		{"POST", "/subjects/s", schemaBody(userV1), 200, 0, "", `"version":1`},
		{"POST", "/subjects/s", schemaBody(userBad), 404, 40403, "", ""},
		{"POST", "/subjects/nope", schemaBody(userV1), 404, 40401, "", ""},
		{"POST", "/compatibility/subjects/s/versions/latest", schemaBody(userBad), 200, 0, `{"is_compatible":false}`, ""},
		{"POST", "/compatibility/subjects/s/versions/latest?verbose=true", schemaBody(userBad), 200, 0, "", `"messages":["backward`},
		{"POST", "/compatibility/subjects/s/versions/1", schemaBody(userV2), 200, 0, `{"is_compatible":true}`, ""},
		{"POST", "/compatibility/subjects/s/versions/9", schemaBody(userV2), 404, 40402, "", ""},
		{"POST", "/compatibility/subjects/new/versions/latest", schemaBody(userV2), 200, 0, `{"is_compatible":true}`, ""},
		// Configs.
		{"GET", "/config", nil, 200, 0, `{"compatibilityLevel":"BACKWARD"}`, ""},
		{"PUT", "/config", map[string]any{"compatibility": "SOMETIMES"}, 422, 42203, "", ""},
		{"PUT", "/config/s", map[string]any{"compatibility": "none"}, 200, 0, `{"compatibility":"NONE"}`, ""},
		{"GET", "/config/s", nil, 200, 0, `{"compatibilityLevel":"NONE"}`, ""},
		{"GET", "/config/other", nil, 404, 40408, "", ""},
		{"GET", "/config/other?defaultToGlobal=true", nil, 200, 0, `{"compatibilityLevel":"BACKWARD"}`, ""},
		{"POST", "/subjects/s/versions", schemaBody(userBad), 200, 0, `{"id":3}`, ""},
		{"DELETE", "/config/s", nil, 200, 0, `{"compatibilityLevel":"NONE"}`, ""},
		{"GET", "/config/s", nil, 404, 40408, "", ""},
		{"PUT", "/config", map[string]any{"compatibilityLevel": "FULL"}, 200, 0, `{"compatibility":"FULL"}`, ""},
		{"DELETE", "/config", nil, 200, 0, `{"compatibilityLevel":"FULL"}`, ""},
		{"GET", "/config", nil, 200, 0, `{"compatibilityLevel":"BACKWARD"}`, ""},
		// Modes.
		{"GET", "/mode", nil, 200, 0, `{"mode":"READWRITE"}`, ""},
		{"PUT", "/mode", map[string]any{"mode": "BOGUS"}, 422, 42204, "", ""},
		{"PUT", "/mode/s", map[string]any{"mode": "READONLY"}, 200, 0, `{"mode":"READONLY"}`, ""},
		{"GET", "/mode/s", nil, 200, 0, `{"mode":"READONLY"}`, ""},
		{"GET", "/mode/other", nil, 404, 40409, "", ""},
		{"GET", "/mode/other?defaultToGlobal=true", nil, 200, 0, `{"mode":"READWRITE"}`, ""},
		{"POST", "/subjects/s/versions", schemaBody(`{"type":"record","name":"X","fields":[]}`), 422, 42205, "", ""},
		{"DELETE", "/subjects/s/versions/1", nil, 422, 42205, "", ""},
		{"DELETE", "/mode/s", nil, 200, 0, `{"mode":"READONLY"}`, ""},
		{"PUT", "/mode/s", map[string]any{"mode": "IMPORT"}, 422, 42205, "", ""},
		{"PUT", "/mode/imp", map[string]any{"mode": "IMPORT"}, 200, 0, `{"mode":"IMPORT"}`, ""},
		{"POST", "/subjects/imp/versions", map[string]any{"schema": `{"type":"fixed","name":"F","size":4}`, "id": 100, "version": 5}, 200, 0, `{"id":100}`, ""},
		{"GET", "/subjects/imp/versions/5", nil, 200, 0, "", `"id":100`},
		{"POST", "/subjects/imp/versions", map[string]any{"schema": `{"type":"fixed","name":"G","size":4}`, "id": 1}, 422, 42205, "", ""},
		{"POST", "/subjects/after-import/versions", schemaBody(`{"type":"fixed","name":"H","size":2}`), 200, 0, `{"id":101}`, ""},
		// References.
		{"POST", "/subjects/ref-user/versions", schemaBody(userV1), 200, 0, `{"id":1}`, ""},
		{"POST", "/subjects/outer/versions", map[string]any{"schema": outer}, 422, 42201, "", ""},
		{"POST", "/subjects/outer/versions", map[string]any{"schema": outer, "references": []map[string]any{{"name": "t.User", "subject": "ref-user", "version": 9}}}, 422, 42201, "", ""},
		{"POST", "/subjects/outer/versions", map[string]any{"schema": outer, "references": userRef}, 200, 0, `{"id":102}`, ""},
		{"GET", "/subjects/outer/versions/1", nil, 200, 0, "", `"references":[{"name":"t.User","subject":"ref-user","version":1}]`},
		{"GET", "/subjects/ref-user/versions/1/referencedby", nil, 200, 0, `[102]`, ""},
		{"DELETE", "/subjects/ref-user", nil, 422, 42206, "", ""},
		{"DELETE", "/subjects/ref-user/versions/1", nil, 422, 42206, "", ""},
		// Deletion.
		{"DELETE", "/subjects/s/versions/1?permanent=true", nil, 404, 40407, "", ""},
		{"DELETE", "/subjects/s/versions/1", nil, 200, 0, `1`, ""},
		{"DELETE", "/subjects/s/versions/1", nil, 404, 40406, "", ""},
		{"GET", "/subjects/s/versions/1", nil, 404, 40402, "", ""},
		{"GET", "/subjects/s/versions/1?deleted=true", nil, 200, 0, "", `"id":1`},
		{"GET", "/subjects/s/versions", nil, 200, 0, `[2,3]`, ""},
		{"GET", "/subjects/s/versions?deleted=true", nil, 200, 0, `[1,2,3]`, ""},
		{"DELETE", "/subjects/s/versions/1?permanent=true", nil, 200, 0, `1`, ""},
		{"DELETE", "/subjects/s/versions/x", nil, 422, 42202, "", ""},
		{"DELETE", "/subjects/s", nil, 200, 0, `[2,3]`, ""},
		{"DELETE", "/subjects/s", nil, 404, 40404, "", ""},
		{"GET", "/subjects", nil, 200, 0, `["after-import","imp","outer","ref-user"]`, ""},
		{"GET", "/subjects?deleted=true", nil, 200, 0, `["after-import","imp","outer","ref-user","s"]`, ""},
		{"GET", "/subjects?subjectPrefix=ref", nil, 200, 0, `["ref-user"]`, ""},
		{"GET", "/schemas?subjectPrefix=ref", nil, 200, 0, `[{"subject":"ref-user","id":1,"version":1,"schema":` + jsonString(userV1) + `}]`, ""},
		{"GET", "/schemas?subjectPrefix=s&deleted=true&latestOnly=true", nil, 200, 0, "", `"id":3,"version":3`},
		{"GET", "/schemas?offset=1&limit=1", nil, 200, 0, "", `"subject":"imp"`},
		{"DELETE", "/subjects/s?permanent=true", nil, 200, 0, `[2,3]`, ""},
		{"DELETE", "/subjects/s", nil, 404, 40401, "", ""},
		{"GET", "/schemas/ids/3", nil, 404, 40403, "", ""},
		{"GET", "/schemas/ids/2", nil, 404, 40403, "", ""},
		{"GET", "/schemas/ids/1", nil, 200, 0, "", `User`},
		// Protobuf and JSON Schema, by schemaType.
		{"POST", "/subjects/proto/versions", map[string]any{"schemaType": "PROTOBUF", "schema": protoV1}, 200, 0, `{"id":103}`, ""},
		{"GET", "/subjects/proto/versions/1", nil, 200, 0, "", `"schemaType":"PROTOBUF"`},
		{"POST", "/subjects/proto/versions", map[string]any{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\"; message {"}, 422, 42201, "", ""},
		{"POST", "/subjects/proto/versions", map[string]any{"schemaType": "JSON", "schema": jsonV1}, 409, 409, "", ""},
		{"POST", "/subjects/json/versions", map[string]any{"schemaType": "JSON", "schema": jsonV1}, 200, 0, `{"id":104}`, ""},
		{"GET", "/schemas/ids/104", nil, 200, 0, "", `"schemaType":"JSON"`},
		{"POST", "/subjects/json", map[string]any{"schemaType": "JSON", "schema": jsonV1}, 200, 0, "", `"version":1`},
		// Subject names are path segments: "/" travels as %2F.
		{"POST", "/subjects/team%2Fusers/versions", schemaBody(userV1), 200, 0, `{"id":1}`, ""},
		{"GET", "/schemas/ids/1/subjects", nil, 200, 0, "", `"team/users"`},
		{"GET", "/subjects/team%2Fusers/versions/1", nil, 200, 0, "", `"subject":"team/users"`},
		// What is not an API.
		{"GET", "/nope", nil, 404, 404, "", ""},
		{"PATCH", "/subjects", nil, 405, 405, "", ""},
	}
	for i, s := range steps {
		a := call(t, s.method, base+s.path, s.body)
		if a.status != s.status || a.code() != s.code {
			t.Fatalf("step %d: %s %s: %d %s; want status %d error_code %d", i, s.method, s.path, a.status, a.body, s.status, s.code)
		}
		if a.ctype != "application/vnd.schemaregistry.v1+json" {
			t.Errorf("step %d: %s %s: Content-Type %q", i, s.method, s.path, a.ctype)
		}
		if s.want != "" && string(a.body) != s.want {
			t.Fatalf("step %d: %s %s: body %s; want %s", i, s.method, s.path, a.body, s.want)
		}
		if s.contains != "" && !strings.Contains(string(a.body), s.contains) {
			t.Fatalf("step %d: %s %s: body %s; want it to contain %s", i, s.method, s.path, a.body, s.contains)
		}
	}
}

// TestRequestLimits checks that bodies are bounded and media types
// checked.
func TestRequestLimits(t *testing.T) {
	b := testbroker.Start(t)
	base := "http://" + b.RegistryAddr()
	huge := strings.Repeat(" ", 9<<20) + `{"schema":"\"string\""}`
	if a := call(t, "POST", base+"/subjects/big/versions", huge); a.status != 413 {
		t.Fatalf("a 9 MiB body: %d %s; want 413", a.status, a.body)
	}
	for _, ct := range []string{"application/json", "application/octet-stream", "application/vnd.schemaregistry+json"} {
		a := callType(t, base+"/subjects/ct/versions", ct, `{"schema":"\"string\""}`)
		if a.status != 200 {
			t.Fatalf("Content-Type %s: %d %s", ct, a.status, a.body)
		}
	}
	if a := callType(t, base+"/subjects/ct/versions", "text/plain", `{"schema":"\"string\""}`); a.status != 415 {
		t.Fatalf("Content-Type text/plain: %d %s; want 415", a.status, a.body)
	}
	var types []string
	call(t, "GET", base+"/schemas/types", nil).decode(t, &types)
	if !slices.Contains(types, "AVRO") {
		t.Fatalf("schema types %v lack AVRO", types)
	}
}

const (
	protoV1 = `syntax = "proto3"; package t; message User { int64 id = 1; }`
	jsonV1  = `{"type":"object","properties":{"id":{"type":"integer"}}}`
)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
