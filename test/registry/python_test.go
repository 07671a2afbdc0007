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
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
