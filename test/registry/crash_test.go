package registry

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// recordSchema is a distinct Avro schema for each n.
func recordSchema(n int) string {
	return fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"f","type":"int"}]}`, n)
}

// TestSurvivesSIGKILL registers schemas, a subject-level config and
// deletions on the real binary, kills it with SIGKILL right after the last
// answer, and checks that every schema, id, version and setting is there
// after the restart and that no id is handed out twice.
func TestSurvivesSIGKILL(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin)
	base := func() string { return "http://" + p.RegistryAddr() }

	type reg struct {
		subject string
		version int
		schema  string
		id      int
	}
	var regs []reg
	for i := range 30 {
		subject := "crash-" + strconv.Itoa(i%3)
		s := recordSchema(i)
		// Unrelated records in one subject: compatibility off there.
		if i < 3 {
			if a := call(t, "PUT", base()+"/config/"+subject, map[string]any{"compatibility": "NONE"}); a.status != 200 {
				t.Fatalf("PUT config: %d %s", a.status, a.body)
			}
		}
		a := call(t, "POST", base()+"/subjects/"+subject+"/versions", schemaBody(s))
		var ans struct{ ID int }
		if a.status != 200 {
			t.Fatalf("register %d: %d %s", i, a.status, a.body)
		}
		a.decode(t, &ans)
		regs = append(regs, reg{subject, i/3 + 1, s, ans.ID})
	}
	// The highest id goes away for good before the kill: it must not come
	// back as the next id.
	for _, step := range []string{"/subjects/crash-temp/versions", "/subjects/crash-temp", "/subjects/crash-temp?permanent=true"} {
		method := "DELETE"
		var body any
		if step == "/subjects/crash-temp/versions" {
			method, body = "POST", schemaBody(recordSchema(99))
		}
		if a := call(t, method, base()+step, body); a.status != 200 {
			t.Fatalf("%s %s: %d %s", method, step, a.status, a.body)
		}
	}
	p.Kill()
	p.Restart()

	for _, r := range regs {
		a := call(t, "GET", base()+"/subjects/"+r.subject+"/versions/"+strconv.Itoa(r.version), nil)
		var got struct {
			ID     int
			Schema string
		}
		if a.status != 200 {
			t.Fatalf("after the restart, %s version %d: %d %s", r.subject, r.version, a.status, a.body)
		}
		a.decode(t, &got)
		if got.ID != r.id || got.Schema != r.schema {
			t.Fatalf("after the restart, %s version %d: id %d schema %s; want id %d schema %s", r.subject, r.version, got.ID, got.Schema, r.id, r.schema)
		}
		if a := call(t, "GET", base()+"/schemas/ids/"+strconv.Itoa(r.id)+"/schema", nil); string(a.body) != r.schema {
			t.Fatalf("after the restart, id %d: %d %s", r.id, a.status, a.body)
		}
	}
	if a := call(t, "GET", base()+"/config/crash-0", nil); string(a.body) != `{"compatibilityLevel":"NONE"}` {
		t.Fatalf("after the restart, config of crash-0: %s", a.body)
	}
	if a := call(t, "GET", base()+"/schemas/ids/31", nil); a.code() != 40403 {
		t.Fatalf("the permanently deleted id 31 came back: %d %s", a.status, a.body)
	}
	a := call(t, "POST", base()+"/subjects/crash-after/versions", schemaBody(recordSchema(100)))
	if string(a.body) != `{"id":32}` {
		t.Fatalf("the first registration after the restart: %d %s; want id 32 (31 was used and deleted)", a.status, a.body)
	}
}
