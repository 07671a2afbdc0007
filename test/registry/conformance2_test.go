package registry

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// Avro schemas of one record for TestConfluentConformance: c2B adds a
// field with a default (BACKWARD compatible with c2A), c2Bad one without
// (not), c2C another with a default.
const (
	c2A     = `{"type":"record","name":"R","namespace":"c2","fields":[{"name":"a","type":"string"}]}`
	c2ASpcd = `{ "type" : "record", "name" : "R", "namespace" : "c2", "fields" : [ { "name" : "a", "type" : "string" } ] }`
	c2B     = `{"type":"record","name":"R","namespace":"c2","fields":[{"name":"a","type":"string"},{"name":"b","type":"string","default":""}]}`
	c2Bad   = `{"type":"record","name":"R","namespace":"c2","fields":[{"name":"a","type":"string"},{"name":"x","type":"int"}]}`
	c2C     = `{"type":"record","name":"R","namespace":"c2","fields":[{"name":"a","type":"string"},{"name":"c","type":"string","default":""}]}`
	c2D     = `{"type":"record","name":"R","namespace":"c2","fields":[{"name":"a","type":"string"},{"name":"d","type":"string","default":""}]}`
)

// TestConfluentConformance checks, endpoint by endpoint, the behaviour
// Confluent Schema Registry documents and its REST resources implement
// (the checklist in docs/schema-registry.md): statuses, error codes,
// answer shapes and the version and deletion rules. One registry, steps
// in order.
func TestConfluentConformance(t *testing.T) {
	b := testbroker.Start(t)
	base := "http://" + b.RegistryAddr()
	sb := schemaBody
	steps := []struct {
		method, path string
		body         any
		status, code int    // code: the error_code; 0 for a success
		want         string // the exact body, when set
		contains     string // a part of the body, when set
		absent       string // not a part of the body, when set
	}{
		// The server.
		{"GET", "/", nil, 200, 0, `{}`, "", ""},
		{"GET", "/v1/metadata/id", nil, 200, 0, "", `{"scope":{"path":[],"clusters":{"kafka-cluster":"`, ""},
		{"GET", "/v1/metadata/id", nil, 200, 0, "", `"schema-registry-cluster":"schema-registry"}}`, ""},
		{"GET", "/v1/metadata/version", nil, 200, 0, "", `"version":"`, ""},
		{"GET", "/v1/metadata/version", nil, 200, 0, "", `"commitId":"`, ""},
		{"GET", "/contexts", nil, 200, 0, `["."]`, "", ""},
		{"GET", "/schemas/types", nil, 200, 0, "", `"AVRO"`, ""},
		{"GET", "/no/such/path", nil, 404, 404, `{"error_code":404,"message":"HTTP 404 Not Found"}`, "", ""},
		{"DELETE", "/schemas/types", nil, 405, 405, `{"error_code":405,"message":"HTTP 405 Method Not Allowed"}`, "", ""},
		// Registration: one schema, one id; the same id under another
		// subject; whitespace does not make another schema.
		{"POST", "/subjects/c2/versions", sb(c2A), 200, 0, `{"id":1}`, "", ""},
		{"POST", "/subjects/c2/versions", sb(c2ASpcd), 200, 0, `{"id":1}`, "", ""},
		{"POST", "/subjects/c2/versions?normalize=true", sb(c2A), 200, 0, `{"id":1}`, "", ""},
		{"GET", "/subjects/c2/versions", nil, 200, 0, `[1]`, "", ""},
		{"POST", "/subjects/c2-other/versions", sb(c2A), 200, 0, `{"id":1}`, "", ""},
		{"GET", "/subjects/c2-other/versions/1", nil, 200, 0, `{"subject":"c2-other","id":1,"version":1,"schema":` + jsonString(c2A) + `}`, "", ""},
		// A version may be given outside IMPORT only as the next one; an
		// id only in IMPORT.
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "version": 5}, 422, 42201, "", "Version is not one more than previous version", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "id": 50}, 422, 42205, "", "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "version": 2}, 200, 0, `{"id":2}`, "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "version": -1}, 200, 0, `{"id":2}`, "", ""},
		{"POST", "/subjects/c2/versions", sb(c2Bad), 409, 409, "", `Schema being registered is incompatible with an earlier schema for subject \"c2\"`, ""},
		{"POST", "/subjects/c2/versions", sb("not json"), 422, 42201, "", "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "schemaType": "NOPE"}, 422, 42201, "", "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "schemaType": "avro"}, 422, 42201, "", "", ""},
		{"POST", "/subjects/c2/versions", "{", 400, 400, "", "", ""},
		{"POST", "/subjects/c2/versions", `{"schema": 5}`, 400, 400, "", "", ""},
		{"POST", "/subjects/c2/versions", " ", 422, 422, "", "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2B, "version": 1 << 31}, 400, 400, "", "", ""},
		// Schemas by id.
		{"GET", "/schemas/ids/1", nil, 200, 0, `{"schema":` + jsonString(c2A) + `}`, "", ""},
		{"GET", "/schemas/ids/1?subject=c2", nil, 200, 0, `{"schema":` + jsonString(c2A) + `}`, "", ""},
		{"GET", "/schemas/ids/1?format=resolved", nil, 200, 0, `{"schema":` + jsonString(c2A) + `}`, "", ""},
		{"GET", "/schemas/ids/1?fetchMaxId=true", nil, 200, 0, `{"schema":` + jsonString(c2A) + `,"maxId":2}`, "", ""},
		{"GET", "/schemas/ids/1/schema", nil, 200, 0, c2A, "", ""},
		{"GET", "/schemas/ids/1/subjects", nil, 200, 0, `["c2","c2-other"]`, "", ""},
		{"GET", "/schemas/ids/1/versions", nil, 200, 0, `[{"subject":"c2","version":1},{"subject":"c2-other","version":1}]`, "", ""},
		{"GET", "/schemas/ids/1/subjects?subject=c2-other", nil, 200, 0, `["c2-other"]`, "", ""},
		{"GET", "/schemas/ids/1/versions?subject=c2", nil, 200, 0, `[{"subject":"c2","version":1}]`, "", ""},
		{"GET", "/schemas/ids/999", nil, 404, 40403, `{"error_code":40403,"message":"Schema 999 not found"}`, "", ""},
		{"GET", "/schemas/ids/999/schema", nil, 404, 40403, "", "", ""},
		{"GET", "/schemas/ids/0", nil, 404, 40403, `{"error_code":40403,"message":"Schema 0 not found"}`, "", ""},
		{"GET", "/schemas/ids/abc", nil, 404, 404, `{"error_code":404,"message":"HTTP 404 Not Found"}`, "", ""},
		{"GET", "/schemas/ids/99999999999/subjects", nil, 404, 404, "", "", ""},
		{"GET", "/schemas/ids/999/subjects", nil, 404, 40403, "", "", ""},
		{"GET", "/schemas/ids/999/versions", nil, 404, 40403, "", "", ""},
		{"GET", "/schemas?subjectPrefix=c2-", nil, 200, 0, `[{"subject":"c2-other","id":1,"version":1,"schema":` + jsonString(c2A) + `}]`, "", ""},
		{"GET", "/schemas?subjectPrefix=c2&latestOnly=true", nil, 200, 0, "", `"subject":"c2","id":2,"version":2`, `"version":1,"schema":` + jsonString(c2B)},
		{"GET", "/schemas?subjectPrefix=c2&offset=1&limit=1", nil, 200, 0, "", `"subject":"c2","id":2,"version":2`, `c2-other`},
		// Versions.
		{"GET", "/subjects/c2/versions/latest", nil, 200, 0, `{"subject":"c2","id":2,"version":2,"schema":` + jsonString(c2B) + `}`, "", ""},
		{"GET", "/subjects/c2/versions/-1", nil, 200, 0, "", `"version":2`, ""},
		{"GET", "/subjects/c2/versions/latest/schema", nil, 200, 0, c2B, "", ""},
		{"GET", "/subjects/c2/versions/2147483647", nil, 404, 40402, `{"error_code":40402,"message":"Version 2147483647 not found."}`, "", ""},
		{"GET", "/subjects/c2/versions/2147483648", nil, 422, 42202, "", "", ""},
		{"GET", "/subjects/c2/versions/-2", nil, 422, 42202, "", "", ""},
		{"GET", "/subjects/c2/versions/0", nil, 422, 42202, "", "", ""},
		{"GET", "/subjects/nosub/versions", nil, 404, 40401, `{"error_code":40401,"message":"Subject 'nosub' not found."}`, "", ""},
		{"GET", "/subjects/nosub/versions/latest", nil, 404, 40401, "", "", ""},
		{"GET", "/subjects/nosub/versions/1/referencedby", nil, 404, 40401, "", "", ""},
		{"GET", "/subjects/c2/versions/1/referencedby", nil, 200, 0, `[]`, "", ""},
		// Lookup.
		{"POST", "/subjects/c2", sb(c2A), 200, 0, `{"subject":"c2","id":1,"version":1,"schema":` + jsonString(c2A) + `}`, "", ""},
		{"POST", "/subjects/c2?normalize=true", sb(c2ASpcd), 200, 0, "", `"version":1`, ""},
		{"POST", "/subjects/c2", sb(c2C), 404, 40403, `{"error_code":40403,"message":"Schema not found"}`, "", ""},
		{"POST", "/subjects/nosub", sb(c2A), 404, 40401, "", "", ""},
		// Compatibility.
		{"POST", "/compatibility/subjects/c2/versions/latest", sb(c2Bad), 200, 0, `{"is_compatible":false}`, "", ""},
		{"POST", "/compatibility/subjects/c2/versions/latest?verbose=true", sb(c2Bad), 200, 0, "", `"is_compatible":false,"messages":[`, ""},
		{"POST", "/compatibility/subjects/c2/versions?verbose=true", sb(c2C), 200, 0, `{"is_compatible":true,"messages":[]}`, "", ""},
		{"POST", "/compatibility/subjects/c2/versions/1?normalize=true", sb(c2C), 200, 0, `{"is_compatible":true}`, "", ""},
		{"POST", "/compatibility/subjects/c2/versions/9", sb(c2C), 404, 40402, "", "", ""},
		{"POST", "/compatibility/subjects/c2/versions/x", sb(c2C), 422, 42202, "", "", ""},
		{"POST", "/compatibility/subjects/c2/versions/latest", sb("{"), 422, 42201, "", "", ""},
		{"POST", "/compatibility/subjects/nosub/versions/1", sb(c2C), 404, 40402, "", "", ""},
		{"POST", "/compatibility/subjects/nosub/versions/latest", sb(c2C), 200, 0, `{"is_compatible":true}`, "", ""},
		{"POST", "/compatibility/subjects/nosub/versions", sb(c2C), 200, 0, `{"is_compatible":true}`, "", ""},
		// Config: GET answers compatibilityLevel, PUT compatibility; a
		// subject's own level is deleted once (then 40401).
		{"GET", "/config", nil, 200, 0, `{"compatibilityLevel":"BACKWARD"}`, "", ""},
		{"PUT", "/config/c2", map[string]any{"compatibility": "FULL"}, 200, 0, `{"compatibility":"FULL"}`, "", ""},
		{"GET", "/config/c2", nil, 200, 0, `{"compatibilityLevel":"FULL"}`, "", ""},
		{"DELETE", "/config/c2", nil, 200, 0, `{"compatibilityLevel":"FULL"}`, "", ""},
		{"DELETE", "/config/c2", nil, 404, 40401, "", "", ""},
		{"GET", "/config/c2", nil, 404, 40408, `{"error_code":40408,"message":"Subject 'c2' does not have subject-level compatibility configured"}`, "", ""},
		{"GET", "/config/c2?defaultToGlobal=true", nil, 200, 0, `{"compatibilityLevel":"BACKWARD"}`, "", ""},
		{"PUT", "/config/nosub-cfg", map[string]any{"compatibility": "NONE"}, 200, 0, `{"compatibility":"NONE"}`, "", ""},
		{"GET", "/config/nosub-cfg", nil, 200, 0, `{"compatibilityLevel":"NONE"}`, "", ""},
		{"PUT", "/config/nosub-cfg", map[string]any{"compatibility": "NONE", "normalize": true}, 200, 0, `{"compatibility":"NONE","normalize":true}`, "", ""},
		{"PUT", "/config", map[string]any{"compatibility": "SOMETIMES"}, 422, 42203, "", "", ""},
		{"PUT", "/config/bad%01subject", map[string]any{"compatibility": "NONE"}, 422, 42208, "", "", ""},
		{"PUT", "/mode/bad%01subject", map[string]any{"mode": "READONLY"}, 422, 42208, "", "", ""},
		{"POST", "/subjects/bad%01subject/versions", sb(c2A), 422, 42208, "", "", ""},
		{"PUT", "/config", "{", 400, 400, "", "", ""},
		// Mode. An existing schema is answered even in READONLY.
		{"GET", "/mode", nil, 200, 0, `{"mode":"READWRITE"}`, "", ""},
		{"PUT", "/mode/c2", map[string]any{"mode": "READONLY"}, 200, 0, `{"mode":"READONLY"}`, "", ""},
		{"POST", "/subjects/c2/versions", sb(c2A), 200, 0, `{"id":1}`, "", ""},
		{"POST", "/subjects/c2/versions", sb(c2C), 422, 42205, "", "", ""},
		{"DELETE", "/subjects/c2/versions/1", nil, 422, 42205, "", "", ""},
		{"DELETE", "/subjects/c2", nil, 422, 42205, "", "", ""},
		{"DELETE", "/mode/c2", nil, 200, 0, `{"mode":"READONLY"}`, "", ""},
		{"DELETE", "/mode/c2", nil, 404, 40401, "", "", ""},
		{"GET", "/mode/c2", nil, 404, 40409, `{"error_code":40409,"message":"Subject 'c2' does not have subject-level mode configured"}`, "", ""},
		{"GET", "/mode/c2?defaultToGlobal=true", nil, 200, 0, `{"mode":"READWRITE"}`, "", ""},
		{"PUT", "/mode", map[string]any{"mode": "SOMETIMES"}, 422, 42204, "", "", ""},
		{"PUT", "/mode/c2", map[string]any{"mode": "IMPORT"}, 422, 42205, "", "", ""},
		{"PUT", "/mode/c2?force=true", map[string]any{"mode": "import"}, 200, 0, `{"mode":"IMPORT"}`, "", ""},
		// IMPORT: an id is required; compatibility is not checked.
		{"POST", "/subjects/c2/versions", sb(c2D), 422, 42205, "", "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2D, "id": 100, "version": 7}, 200, 0, `{"id":100}`, "", ""},
		{"POST", "/subjects/c2/versions", map[string]any{"schema": c2C, "id": 1, "version": 8}, 422, 42205, "", "Overwrite new schema with id 1 is not permitted.", ""},
		{"PUT", "/mode/c2-imp", map[string]any{"mode": "IMPORT"}, 200, 0, `{"mode":"IMPORT"}`, "", ""},
		{"POST", "/subjects/c2-imp/versions", map[string]any{"schema": `"string"`, "id": 300, "version": 3}, 200, 0, `{"id":300}`, "", ""},
		{"POST", "/subjects/c2-imp/versions", map[string]any{"schema": `"int"`, "id": 301, "version": 1}, 200, 0, `{"id":301}`, "", ""},
		{"POST", "/subjects/c2-imp/versions", map[string]any{"schema": `"long"`, "id": 302}, 200, 0, `{"id":302}`, "", ""},
		{"POST", "/subjects/c2-imp/versions", map[string]any{"schema": `"float"`, "id": 303, "version": 1}, 200, 0, `{"id":303}`, "", ""},
		{"GET", "/subjects/c2-imp/versions", nil, 200, 0, `[1,3,4]`, "", ""},
		{"GET", "/subjects/c2-imp/versions/1", nil, 200, 0, "", `"id":303`, ""},
		{"GET", "/schemas/ids/301", nil, 404, 40403, "", "", ""},
		{"DELETE", "/subjects/c2-imp", nil, 200, 0, `[1,3,4]`, "", ""},
		{"DELETE", "/subjects/c2-imp?permanent=true", nil, 200, 0, `[1,3,4]`, "", ""},
		{"GET", "/mode/c2-imp", nil, 404, 40409, "", "", ""},
		{"DELETE", "/mode/c2", nil, 200, 0, `{"mode":"IMPORT"}`, "", ""},
		{"GET", "/subjects/c2/versions", nil, 200, 0, `[1,2,7]`, "", ""},
		// Deletion: soft first, then permanent.
		{"DELETE", "/subjects/c2/versions/1?permanent=true", nil, 404, 40407, `{"error_code":40407,"message":"Subject 'c2' Version 1 was not deleted first before being permanently deleted"}`, "", ""},
		{"DELETE", "/subjects/c2/versions/1", nil, 200, 0, `1`, "", ""},
		{"DELETE", "/subjects/c2/versions/1", nil, 404, 40406, `{"error_code":40406,"message":"Subject 'c2' Version 1 was soft deleted.Set permanent=true to delete permanently"}`, "", ""},
		{"DELETE", "/subjects/c2/versions/99", nil, 404, 40402, "", "", ""},
		{"DELETE", "/subjects/c2/versions/abc", nil, 422, 42202, "", "", ""},
		{"GET", "/subjects/c2/versions/1", nil, 404, 40402, "", "", ""},
		{"GET", "/subjects/c2/versions/1?deleted=true", nil, 200, 0, "", `"version":1`, ""},
		{"GET", "/subjects/c2/versions/1/referencedby", nil, 200, 0, `[]`, "", ""},
		{"GET", "/subjects/c2/versions", nil, 200, 0, `[2,7]`, "", ""},
		{"GET", "/subjects/c2/versions?deleted=true", nil, 200, 0, `[1,2,7]`, "", ""},
		{"GET", "/subjects/c2/versions?deletedOnly=true", nil, 200, 0, `[1]`, "", ""},
		{"GET", "/schemas/ids/1/versions", nil, 200, 0, `[{"subject":"c2-other","version":1}]`, "", ""},
		{"GET", "/schemas/ids/1/versions?deleted=true", nil, 200, 0, `[{"subject":"c2","version":1},{"subject":"c2-other","version":1}]`, "", ""},
		{"GET", "/schemas/ids/1/subjects", nil, 200, 0, `["c2-other"]`, "", ""},
		{"GET", "/schemas/ids/1/subjects?deleted=true", nil, 200, 0, `["c2","c2-other"]`, "", ""},
		{"GET", "/schemas/ids/1", nil, 200, 0, "", `"schema":`, ""},
		{"POST", "/subjects/c2", sb(c2A), 404, 40403, "", "", ""},
		{"POST", "/subjects/c2?deleted=true", sb(c2A), 200, 0, "", `"version":1`, ""},
		// The soft-deleted schema registered again: a new version, and
		// the soft-deleted version of its id is gone.
		{"POST", "/subjects/c2/versions", sb(c2A), 200, 0, `{"id":1}`, "", ""},
		{"GET", "/subjects/c2/versions?deleted=true", nil, 200, 0, `[2,7,8]`, "", ""},
		{"DELETE", "/subjects/c2/versions/latest", nil, 200, 0, `8`, "", ""},
		{"GET", "/subjects/c2/versions/latest", nil, 200, 0, "", `"version":7`, ""},
		{"DELETE", "/subjects/c2", nil, 200, 0, `[2,7]`, "", ""},
		{"DELETE", "/subjects/c2", nil, 404, 40404, `{"error_code":40404,"message":"Subject 'c2' was soft deleted.Set permanent=true to delete permanently"}`, "", ""},
		{"GET", "/subjects/c2/versions", nil, 404, 40401, "", "", ""},
		{"GET", "/subjects/c2/versions?deleted=true", nil, 200, 0, `[2,7,8]`, "", ""},
		{"DELETE", "/subjects/c2/versions/99", nil, 404, 40402, "", "", ""},
		{"GET", "/subjects", nil, 200, 0, `["c2-other"]`, "", ""},
		{"GET", "/subjects?deleted=true", nil, 200, 0, `["c2","c2-other"]`, "", ""},
		{"GET", "/subjects?deletedOnly=true", nil, 200, 0, `["c2"]`, "", ""},
		{"GET", "/subjects?subjectPrefix=c2-", nil, 200, 0, `["c2-other"]`, "", ""},
		{"DELETE", "/subjects/c2-other?permanent=true", nil, 404, 40405, `{"error_code":40405,"message":"Subject 'c2-other' was not deleted first before being permanently deleted"}`, "", ""},
		{"DELETE", "/subjects/c2?permanent=true", nil, 200, 0, `[2,7,8]`, "", ""},
		{"DELETE", "/subjects/c2", nil, 404, 40401, "", "", ""},
		{"DELETE", "/subjects/c2?permanent=true", nil, 404, 40401, "", "", ""},
		{"GET", "/subjects?deleted=true", nil, 200, 0, `["c2-other"]`, "", ""},
		{"GET", "/schemas/ids/100", nil, 404, 40403, "", "", ""},
		// normalize=true: JSON Schema and Protobuf written differently
		// are the same schema.
		{"POST", "/subjects/c2-json/versions?normalize=true", map[string]any{"schemaType": "JSON", "schema": `{"type":"object","properties":{"a":{"type":"string"}}}`}, 200, 0, "", `{"id":`, ""},
		{"POST", "/subjects/c2-json/versions?normalize=true", map[string]any{"schemaType": "JSON", "schema": `{ "properties": { "a": { "type": "string" } }, "type": "object" }`}, 200, 0, "", `{"id":`, ""},
		{"GET", "/subjects/c2-json/versions", nil, 200, 0, `[1]`, "", ""},
		{"POST", "/subjects/c2-json?normalize=true", map[string]any{"schemaType": "JSON", "schema": `{"properties":{"a":{"type":"string"}},"type":"object"}`}, 200, 0, "", `"schemaType":"JSON"`, ""},
		{"POST", "/subjects/c2-proto/versions?normalize=true", map[string]any{"schemaType": "PROTOBUF", "schema": "syntax = \"proto3\";\nmessage M { string a = 1; }"}, 200, 0, "", `{"id":`, ""},
		{"POST", "/subjects/c2-proto/versions?normalize=true", map[string]any{"schemaType": "PROTOBUF", "schema": "syntax=\"proto3\";\n\n// a comment\nmessage M {\n  string a = 1;\n}\n"}, 200, 0, "", `{"id":`, ""},
		{"GET", "/subjects/c2-proto/versions", nil, 200, 0, `[1]`, "", ""},
		{"GET", "/subjects/c2-proto/versions/1", nil, 200, 0, "", `"schemaType":"PROTOBUF"`, ""},
		// After a permanent delete, versions start again at 1.
		{"POST", "/subjects/c2/versions", sb(c2B), 200, 0, "", `{"id":`, ""},
		{"GET", "/subjects/c2/versions", nil, 200, 0, `[1]`, "", ""},
	}
	for i, s := range steps {
		a := call(t, s.method, base+s.path, s.body)
		if a.status != s.status || a.code() != s.code {
			t.Errorf("step %d: %s %s: %d %s; want status %d error_code %d", i, s.method, s.path, a.status, a.body, s.status, s.code)
			continue
		}
		if a.ctype != "application/vnd.schemaregistry.v1+json" {
			t.Errorf("step %d: %s %s: Content-Type %q", i, s.method, s.path, a.ctype)
		}
		if s.want != "" && string(a.body) != s.want {
			t.Errorf("step %d: %s %s: body %s; want %s", i, s.method, s.path, a.body, s.want)
		}
		if s.contains != "" && !strings.Contains(string(a.body), s.contains) {
			t.Errorf("step %d: %s %s: body %s; want it to contain %s", i, s.method, s.path, a.body, s.contains)
		}
		if s.absent != "" && strings.Contains(string(a.body), s.absent) {
			t.Errorf("step %d: %s %s: body %s; want it without %s", i, s.method, s.path, a.body, s.absent)
		}
	}
}

// TestConfluentMediaTypes checks the media types Confluent's resources
// consume and produce: request bodies of its JSON types or
// application/octet-stream, answers negotiated from Accept (406 when none
// fits), errors included.
func TestConfluentMediaTypes(t *testing.T) {
	b := testbroker.Start(t)
	base := "http://" + b.RegistryAddr()
	body := `{"schema":"\"string\""}`
	cases := []struct {
		method, path, ctype, accept string
		status                      int
		answer                      string // the answer's Content-Type
	}{
		{"POST", "/subjects/m/versions", "application/vnd.schemaregistry.v1+json", "", 200, "application/vnd.schemaregistry.v1+json"},
		{"POST", "/subjects/m/versions", "application/vnd.schemaregistry+json", "", 200, "application/vnd.schemaregistry.v1+json"},
		{"POST", "/subjects/m/versions", "application/json", "", 200, "application/vnd.schemaregistry.v1+json"},
		{"POST", "/subjects/m/versions", "application/octet-stream", "", 200, "application/vnd.schemaregistry.v1+json"},
		{"POST", "/subjects/m/versions", "", "", 200, "application/vnd.schemaregistry.v1+json"},
		{"POST", "/subjects/m/versions", "text/plain", "", 415, "application/vnd.schemaregistry.v1+json"},
		{"GET", "/subjects/m/versions/1", "", "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json", 200, "application/vnd.schemaregistry.v1+json"},
		{"GET", "/subjects/m/versions/1", "", "*/*", 200, "application/vnd.schemaregistry.v1+json"},
		{"GET", "/subjects/m/versions/1", "", "application/json", 200, "application/json"},
		{"GET", "/subjects/m/versions/1", "", "application/json, text/plain, */*", 200, "application/vnd.schemaregistry.v1+json"},
		{"GET", "/subjects/m/versions/1", "", "application/json;q=0.9, */*;q=0.8", 200, "application/json"},
		{"GET", "/subjects/m/versions/1", "", "application/vnd.schemaregistry+json", 200, "application/vnd.schemaregistry+json"},
		{"GET", "/subjects/m/versions/9", "", "application/json", 404, "application/json"},
		{"GET", "/subjects/m/versions/1", "", "text/html", 406, "application/vnd.schemaregistry.v1+json"},
	}
	for _, c := range cases {
		var rd io.Reader
		if c.method == "POST" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(c.method, base+c.path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.answer {
			t.Errorf("%s %s (Content-Type %q, Accept %q): %d %s, Content-Type %q; want %d, %q",
				c.method, c.path, c.ctype, c.accept, resp.StatusCode, got, resp.Header.Get("Content-Type"), c.status, c.answer)
		}
		if c.status != 200 && !bytes.Contains(got, []byte(`"error_code":`)) {
			t.Errorf("%s %s: error answer %s without an error_code", c.method, c.path, got)
		}
	}
}
