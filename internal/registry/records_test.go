package registry

import (
	"encoding/json"
	"errors"
	"testing"
)

func schemaRecord(subject string, version, id int, text string, deleted bool) Record {
	return Record{Key: schemaKey(subject, version), Value: mustJSON(schemaValue{Subject: subject, Version: version, ID: id, Schema: text, Deleted: deleted})}
}

func TestRecordFormat(t *testing.T) {
	for _, tc := range []struct {
		key  []byte
		want string
	}{
		{schemaKey("s", 3), `{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}`},
		{configKey(""), `{"keytype":"CONFIG","magic":0}`},
		{configKey("s"), `{"keytype":"CONFIG","subject":"s","magic":0}`},
		{modeKey("s"), `{"keytype":"MODE","subject":"s","magic":0}`},
		{maxIDKey(), `{"keytype":"MAX_ID","magic":0}`},
	} {
		if string(tc.key) != tc.want {
			t.Errorf("key %s, want %s (docs/formats.md)", tc.key, tc.want)
		}
	}
	r := schemaRecord("s", 2, 7, `"string"`, true)
	c, err := decodeRecord(r.Key, r.Value)
	if err != nil || c.kind != keySchema || c.subject != "s" || c.version != 2 || c.schema.ID != 7 || !c.schema.Deleted {
		t.Fatalf("decoded %+v, %v", c, err)
	}
	for _, bad := range []struct{ k, v string }{
		{`nope`, `{}`},
		{`{"keytype":"SCHEMA","version":1}`, `{}`},
		{`{"keytype":"SCHEMA","subject":"s","version":1}`, `{"subject":"t","version":1,"id":1,"schema":"x"}`},
		{`{"keytype":"SCHEMA","subject":"s","version":1}`, `{"subject":"s","version":1,"id":0,"schema":"x"}`},
		{`{"keytype":"CONFIG"}`, `{"compatibilityLevel":""}`},
		{`{"keytype":"MODE"} {}`, `{"mode":"IMPORT"}`},
	} {
		if _, err := decodeRecord([]byte(bad.k), []byte(bad.v)); !errors.Is(err, ErrBadRecord) {
			t.Errorf("decodeRecord(%s, %s) = %v, want ErrBadRecord", bad.k, bad.v, err)
		}
	}
}

// TestReplay applies records as a restarted broker reads them: after
// compaction dropped a permanently deleted schema, MAX_ID still keeps its
// id from being handed out again.
func TestReplay(t *testing.T) {
	r := New(DefaultConfig(), nil, nil, nil)
	r.applyAll([]Record{
		schemaRecord("a", 1, 5, `{"type":"fixed","name":"F","size":1}`, false),
		schemaRecord("a", 2, 6, `{"type":"fixed","name":"G","size":1}`, false),
		{Offset: 2, Key: maxIDKey(), Value: mustJSON(maxIDValue{MaxID: 9})},
		{Offset: 3, Key: configKey("a"), Value: mustJSON(configValue{CompatibilityLevel: "NONE"})},
		{Offset: 4, Key: []byte(`{"keytype":"NOOP","magic":0}`)},
		{Offset: 5, Key: schemaKey("a", 2)},
		{Offset: 6, Key: []byte(`not json`), Value: []byte(`x`)},
	}, 7)
	if r.applied != 7 {
		t.Fatalf("applied %d, want 7", r.applied)
	}
	if _, ok := r.SchemaByID(6); ok {
		t.Error("id 6's only version was tombstoned, yet SchemaByID finds it")
	}
	if info, ok := r.SchemaByID(5); !ok || info.Schema != `{"type":"fixed","name":"F","size":1}` {
		t.Errorf("SchemaByID(5) = %+v, %v", info, ok)
	}
	if !r.RegisteredUnder("a", 5) || r.RegisteredUnder("a", 6) {
		t.Error("RegisteredUnder disagrees with the records")
	}
	recs, ans, e := r.st.register("b", &schemaRequest{Schema: `{"type":"fixed","name":"H","size":1}`})
	if e != nil || len(recs) != 1 {
		t.Fatalf("register: %v", e)
	}
	if got := ans.(map[string]int)["id"]; got != 10 {
		t.Fatalf("new id %d, want 10 (MAX_ID 9)", got)
	}
	var v schemaValue
	json.Unmarshal(recs[0].Value, &v)
	if v.Subject != "b" || v.Version != 1 || v.ID != 10 {
		t.Fatalf("record %+v", v)
	}
	// The same schema under another subject keeps its id.
	_, ans, e = r.st.register("c", &schemaRequest{Schema: ` {"type": "fixed", "name": "F", "size": 1}`})
	if e != nil || ans.(map[string]int)["id"] != 5 {
		t.Fatalf("re-registering id 5's schema elsewhere: %v, %v", ans, e)
	}
	// Soft-deleting marks, applying it hides the version from the lookup.
	recs, _, e = r.st.deleteVersion("a", "1", false)
	if e != nil {
		t.Fatal(e)
	}
	recs[0].Offset = 7
	r.applyAll(recs, 8)
	if r.RegisteredUnder("a", 5) {
		t.Error("a soft-deleted version still counts for RegisteredUnder")
	}
	if _, ok := r.SchemaByID(5); !ok {
		t.Error("a soft-deleted version's id must still resolve")
	}
}

// FuzzDecodeRecord feeds arbitrary keys and values, as a damaged or
// foreign _schemas would hold, to the decoder and the state: errors are
// fine, panics are not.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(schemaKey("s", 1), schemaRecord("s", 1, 1, `"string"`, false).Value)
	f.Add(configKey("s"), mustJSON(configValue{CompatibilityLevel: "FULL"}))
	f.Add(modeKey(""), mustJSON(modeValue{Mode: "IMPORT"}))
	f.Add(maxIDKey(), mustJSON(maxIDValue{MaxID: 3}))
	f.Add(schemaKey("s", 1), []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c, err := decodeRecord(key, value)
		if err != nil {
			return
		}
		r := New(DefaultConfig(), nil, nil, nil)
		r.mu.Lock()
		r.apply(c)
		r.apply(c)
		r.mu.Unlock()
		if c.kind == keySchema && c.schema != nil {
			if _, ok := r.SchemaByID(c.schema.ID); !ok {
				t.Fatalf("applied %+v but SchemaByID(%d) finds nothing", c.schema, c.schema.ID)
			}
		}
	})
}
