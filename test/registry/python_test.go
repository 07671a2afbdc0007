package registry

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestConfluentPythonClient drives the registry with confluent-kafka-
// python's SchemaRegistryClient (Debian python3-confluent-kafka and
// python3-requests).
func TestConfluentPythonClient(t *testing.T) {
	testbroker.NeedPythonModule(t, "requests", "python3-requests")
	testbroker.NeedPythonModule(t, "confluent_kafka.schema_registry", "python3-confluent-kafka")
	b := testbroker.Start(t)
	out := testbroker.RunTool(t, nil, 2*time.Minute, testbroker.Python, "testdata/confluent_client.py",
		"http://"+b.RegistryAddr(), userV1, userV2, userBad)
	var got struct {
		IDs            []int    `json:"ids"`
		Incompatible   []int    `json:"incompatible"`
		Latest         []any    `json:"latest"`
		Lookup         []int    `json:"lookup"`
		Versions       []int    `json:"versions"`
		Compatible     []bool   `json:"compatible"`
		Level          string   `json:"level"`
		Subjects       []string `json:"subjects"`
		MissingVersion []int    `json:"missing_version"`
		Deleted        []int    `json:"deleted"`
		DeletedSubject []int    `json:"deleted_subject"`
		Py2Version1    []any    `json:"py2_version1"`
		Py2Compatible  []bool   `json:"py2_compatible_v1"`
		Py2DeletedVer  int      `json:"py2_deleted_version"`
		Py2Versions    []int    `json:"py2_versions"`
		Py2Lookup      []int    `json:"py2_lookup_deleted"`
		Py2Permanent   []int    `json:"py2_permanent"`
		Py2Gone        []int    `json:"py2_gone"`
		Py2Again       []int    `json:"py2_delete_again"`
		GlobalLevel    string   `json:"global_level"`
		BadLevel       []int    `json:"bad_level"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the script's output %q: %v", out, err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"ids", got.IDs, []int{1, 2}},
		{"incompatible", got.Incompatible, []int{409, 409}},
		{"latest", got.Latest, []any{2.0, 2.0, "py-value"}},
		{"lookup", got.Lookup, []int{1, 1}},
		{"versions", got.Versions, []int{1, 2}},
		{"compatible", got.Compatible, []bool{true, false}},
		{"level", got.Level, "FULL"},
		{"subjects", got.Subjects, []string{"py-value"}},
		{"missing version", got.MissingVersion, []int{404, 40402}},
		{"deleted", got.Deleted, []int{1, 2}},
		{"deleted subject", got.DeletedSubject, []int{404, 40401}},
		{"get_version", got.Py2Version1, []any{1.0, 1.0, "py2-value"}},
		{"test_compatibility against version 1", got.Py2Compatible, []bool{true, false}},
		{"delete_version", got.Py2DeletedVer, 1},
		{"versions after delete_version", got.Py2Versions, []int{2}},
		{"lookup of a deleted version", got.Py2Lookup, []int{404, 40403}},
		{"delete_subject permanent", got.Py2Permanent, []int{2}},
		{"after a permanent delete", got.Py2Gone, []int{404, 40401}},
		{"delete_subject again", got.Py2Again, []int{404, 40401}},
		{"global level", got.GlobalLevel, "NONE"},
		{"invalid level", got.BadLevel, []int{422, 42203}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
