package registry

import (
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/sluice-mq/sluice/internal/schema"
)

// The modes (Confluent's).
const (
	modeReadWrite        = "READWRITE"
	modeReadOnly         = "READONLY"
	modeReadOnlyOverride = "READONLY_OVERRIDE"
	modeImport           = "IMPORT"
)

// schemaRequest is the body of registrations, lookups and compatibility
// checks.
type schemaRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
	ID         int         `json:"id"`
	Version    int         `json:"version"`
}

// subjectVersionJSON is a version as GET .../versions/{v} and the lookup
// answer it.
type subjectVersionJSON struct {
	Subject    string      `json:"subject"`
	ID         int         `json:"id"`
	Version    int         `json:"version"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

func typeName(t schema.Type) string {
	if t == schema.Avro {
		return "" // Confluent leaves AVRO out
	}
	return string(t)
}

func versionJSON(subject string, v *version, c *content) subjectVersionJSON {
	return subjectVersionJSON{Subject: subject, ID: v.id, Version: v.version, SchemaType: typeName(c.typ),
		References: c.refs, Schema: c.text}
}

// checkSubject refuses subject names Confluent refuses.
func checkSubject(s string) *Error {
	if s == "" || strings.TrimSpace(s) == "" || strings.IndexFunc(s, unicode.IsControl) >= 0 || len(s) > 1024 {
		return errInvalidSubject(s)
	}
	return nil
}

func errInvalidSubject(s string) *Error {
	return newErr(http.StatusUnprocessableEntity, codeInvalidSubject, "The specified subject '%s' is not valid.", s)
}

// parseVersion reads a version path element: "latest" and -1 are -1.
func parseVersion(s string) (int, *Error) {
	if s == "latest" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 || n < -1 || n > math.MaxInt32 {
		return 0, errInvalidVersion(s)
	}
	return int(n), nil
}

// parseRequest parses the request's schema with its references.
func (st *state) parseRequest(req *schemaRequest) (*schema.Schema, string, *Error) {
	t, err := schema.ParseType(req.SchemaType)
	if err == nil && req.SchemaType != "" && req.SchemaType != string(t) {
		// Confluent's type names are case-sensitive.
		err = schema.ErrUnknownType
	}
	if err != nil {
		return nil, "", errInvalidSchema("Invalid schema type %s: %v", req.SchemaType, err)
	}
	if strings.TrimSpace(req.Schema) == "" {
		return nil, "", errInvalidSchema("Empty schema")
	}
	refs, e := st.resolveRefs(req.References)
	if e != nil {
		return nil, "", e
	}
	p, err := schema.Parse(t, req.Schema, refs)
	if err != nil {
		return nil, "", errInvalidSchema("Invalid schema %s, details: %v", clip(req.Schema), err)
	}
	return p, identity(t, p.Canonical(), req.References), nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func readOnly(mode string) bool { return mode == modeReadOnly || mode == modeReadOnlyOverride }

// register decides a registration (POST /subjects/{s}/versions), in
// Confluent's order: a schema the subject has already is answered in any
// mode; then the mode (an id only in IMPORT, no id only in READWRITE);
// then compatibility (not in IMPORT); then the version.
func (st *state) register(subject string, req *schemaRequest) ([]Record, any, *Error) {
	if e := checkSubject(subject); e != nil {
		return nil, nil, e
	}
	p, key, e := st.parseRequest(req)
	if e != nil {
		return nil, nil, e
	}
	if req.Version < -1 || req.ID < -1 {
		return nil, nil, errInvalidSchema("Invalid schema: id and version must be positive")
	}
	// The same schema already a live version of the subject: its id.
	if id, ok := st.byKey[key]; ok {
		for _, v := range st.live(subject, false) {
			if v.id != id {
				continue
			}
			if (req.Version <= 0 && (req.ID <= 0 || req.ID == id)) || (req.ID == id && req.Version == v.version) {
				return nil, map[string]int{"id": id}, nil
			}
		}
	}
	mode := st.mode(subject)
	switch {
	case readOnly(mode):
		return nil, nil, errNotPermitted("Subject %s is in read-only mode", subject)
	case req.ID > 0 && mode != modeImport:
		return nil, nil, errNotPermitted("Subject %s is not in import mode", subject)
	case req.ID <= 0 && mode != modeReadWrite:
		return nil, nil, errNotPermitted("Subject %s is not in read-write mode", subject)
	}
	if mode != modeImport {
		var old []*schema.Schema
		for _, v := range st.live(subject, false) {
			if c := st.schemas[v.id]; c != nil && c.parsed != nil {
				old = append(old, c.parsed)
			}
		}
		if msgs := schema.Check(st.level(subject), p, old); len(msgs) > 0 {
			return nil, nil, newErr(http.StatusConflict, codeIncompatible,
				"Schema being registered is incompatible with an earlier schema for subject \"%s\", details: [%s]",
				subject, strings.Join(msgs, ", "))
		}
	}
	id, known := st.byKey[key]
	if req.ID > 0 {
		if c := st.schemas[req.ID]; c != nil && c.key != key {
			return nil, nil, errNotPermitted("Overwrite new schema with id %d is not permitted.", req.ID)
		}
		id = req.ID
	} else if !known {
		id = st.maxID + 1
	}
	all := st.subjects[subject]
	ver := 1
	if len(all) > 0 {
		ver = all[len(all)-1].version + 1
	}
	if req.Version > 0 {
		if mode != modeImport && req.Version != ver {
			return nil, nil, errInvalidSchema("Version is not one more than previous version")
		}
		// In IMPORT mode a version that exists is written over, as in
		// Confluent.
		ver = req.Version
	}
	text, refs := req.Schema, req.References
	if len(refs) == 0 {
		refs = nil
	}
	if c := st.schemas[id]; c != nil {
		text, refs = c.text, c.refs // one id, one text
	}
	var recs []Record
	// As Confluent: soft-deleted earlier versions of the same id go.
	for _, v := range all {
		if v.deleted && v.id == id && v.version < ver {
			recs = append(recs, Record{Key: schemaKey(subject, v.version)})
		}
	}
	val := schemaValue{Subject: subject, Version: ver, ID: id, SchemaType: typeName(p.Type()), References: refs, Schema: text}
	recs = append(recs, Record{Key: schemaKey(subject, ver), Value: mustJSON(val)})
	if len(recs) > 1 || st.version(subject, ver, true) != nil {
		// The tombstones, or the version written over, may drop the last
		// use of the highest id.
		recs = append(recs, Record{Key: maxIDKey(), Value: mustJSON(maxIDValue{MaxID: max(st.maxID, id)})})
	}
	return recs, map[string]int{"id": id}, nil
}

// lookup finds the version of subject holding the request's schema
// (POST /subjects/{s}).
func (st *state) lookup(subject string, req *schemaRequest, deleted bool) (any, *Error) {
	vs := st.live(subject, deleted)
	if len(vs) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	_, key, e := st.parseRequest(req)
	if e != nil {
		return nil, e
	}
	id, ok := st.byKey[key]
	for i := len(vs) - 1; ok && i >= 0; i-- {
		if vs[i].id == id {
			return versionJSON(subject, vs[i], st.schemas[id]), nil
		}
	}
	return nil, errSchemaNotFound(-1)
}

// referrers are the ids of schemas referencing subject's version v.
func (st *state) referrers(subject string, v int) []int {
	out := []int{}
	for id, c := range st.schemas {
		for _, r := range c.refs {
			rv := r.Version
			if rv == -1 {
				if lv := st.version(r.Subject, -1, false); lv != nil {
					rv = lv.version
				}
			}
			if r.Subject == subject && rv == v {
				out = append(out, id)
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

func (st *state) softDeleteRecord(subject string, v *version) Record {
	c := st.schemas[v.id]
	val := schemaValue{Subject: subject, Version: v.version, ID: v.id, SchemaType: typeName(c.typ),
		References: c.refs, Schema: c.text, Deleted: true}
	return Record{Key: schemaKey(subject, v.version), Value: mustJSON(val)}
}

// deleteSubject decides DELETE /subjects/{s}.
func (st *state) deleteSubject(subject string, permanent bool) ([]Record, any, *Error) {
	if readOnly(st.mode(subject)) {
		return nil, nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	all := st.subjects[subject]
	if len(all) == 0 {
		return nil, nil, errSubjectNotFound(subject)
	}
	live := st.live(subject, false)
	var recs []Record
	deleted := []int{}
	if !permanent {
		if len(live) == 0 {
			return nil, nil, newErr(http.StatusNotFound, codeSubjectSoftDeleted,
				"Subject '%s' was soft deleted.Set permanent=true to delete permanently", subject)
		}
		for _, v := range live {
			if refs := st.referrers(subject, v.version); len(refs) > 0 {
				return nil, nil, newErr(http.StatusUnprocessableEntity, codeReferenceExists,
					"One or more references exist to the schema {subject=%s,version=%d}: ids %v", subject, v.version, refs)
			}
			recs = append(recs, st.softDeleteRecord(subject, v))
			deleted = append(deleted, v.version)
		}
		return recs, deleted, nil
	}
	if len(live) > 0 {
		return nil, nil, newErr(http.StatusNotFound, codeSubjectNotSoftDeleted,
			"Subject '%s' was not deleted first before being permanently deleted", subject)
	}
	for _, v := range all {
		recs = append(recs, Record{Key: schemaKey(subject, v.version)})
		deleted = append(deleted, v.version)
	}
	if _, ok := st.configs[subject]; ok {
		recs = append(recs, Record{Key: configKey(subject)})
	}
	if _, ok := st.modes[subject]; ok {
		recs = append(recs, Record{Key: modeKey(subject)})
	}
	// The highest id may go with these versions; what was assigned once
	// is never assigned again.
	recs = append(recs, Record{Key: maxIDKey(), Value: mustJSON(maxIDValue{MaxID: st.maxID})})
	return recs, deleted, nil
}

// deleteVersion decides DELETE /subjects/{s}/versions/{v}.
func (st *state) deleteVersion(subject, vs string, permanent bool) ([]Record, any, *Error) {
	if readOnly(st.mode(subject)) {
		return nil, nil, errNotPermitted("Subject %s is in read-only mode", subject)
	}
	n, e := parseVersion(vs)
	if e != nil {
		return nil, nil, e
	}
	if len(st.subjects[subject]) == 0 {
		return nil, nil, errSubjectNotFound(subject)
	}
	v := st.version(subject, n, permanent)
	if v == nil {
		if any := st.version(subject, n, true); any != nil && !permanent {
			return nil, nil, newErr(http.StatusNotFound, codeVersionSoftDeleted,
				"Subject '%s' Version %d was soft deleted.Set permanent=true to delete permanently", subject, any.version)
		}
		return nil, nil, errVersionNotFound(n)
	}
	if permanent && !v.deleted {
		return nil, nil, newErr(http.StatusNotFound, codeVersionNotSoftDeleted,
			"Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.version)
	}
	if refs := st.referrers(subject, v.version); len(refs) > 0 {
		return nil, nil, newErr(http.StatusUnprocessableEntity, codeReferenceExists,
			"One or more references exist to the schema {subject=%s,version=%d}: ids %v", subject, v.version, refs)
	}
	if !permanent {
		return []Record{st.softDeleteRecord(subject, v)}, v.version, nil
	}
	recs := []Record{{Key: schemaKey(subject, v.version)}, {Key: maxIDKey(), Value: mustJSON(maxIDValue{MaxID: st.maxID})}}
	if len(st.subjects[subject]) == 1 {
		// The subject's last version: its own config and mode go too,
		// as in Confluent.
		if _, ok := st.configs[subject]; ok {
			recs = append(recs, Record{Key: configKey(subject)})
		}
		if _, ok := st.modes[subject]; ok {
			recs = append(recs, Record{Key: modeKey(subject)})
		}
	}
	return recs, v.version, nil
}

// checkCompatibility answers POST /compatibility/subjects/{s}/versions[/{v}]
// (vs "" checks against every live version as the level says).
func (st *state) checkCompatibility(subject, vs string, req *schemaRequest, verbose bool) (any, *Error) {
	var against []*version
	if vs == "" {
		against = st.live(subject, false)
	} else {
		n, e := parseVersion(vs)
		if e != nil {
			return nil, e
		}
		switch {
		case n == -1:
			against = st.live(subject, false) // the level picks the latest or every one
		default:
			// A missing version is 40402 even when the subject is
			// missing, as in Confluent.
			v := st.version(subject, n, false)
			if v == nil {
				return nil, errVersionNotFound(n)
			}
			against = []*version{v}
		}
	}
	p, _, e := st.parseRequest(req)
	if e != nil {
		return nil, e
	}
	var old []*schema.Schema
	for _, v := range against {
		if c := st.schemas[v.id]; c != nil && c.parsed != nil {
			old = append(old, c.parsed)
		}
	}
	msgs := schema.Check(st.level(subject), p, old)
	out := map[string]any{"is_compatible": len(msgs) == 0}
	if verbose {
		if msgs == nil {
			msgs = []string{}
		}
		out["messages"] = msgs
	}
	return out, nil
}

// setConfig decides PUT /config[/{s}].
func (st *state) setConfig(subject, level string) ([]Record, any, *Error) {
	l, err := schema.ParseLevel(level)
	if err != nil {
		return nil, nil, newErr(http.StatusUnprocessableEntity, codeInvalidCompatibility,
			"Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
	}
	if strings.IndexFunc(subject, unicode.IsControl) >= 0 {
		return nil, nil, errInvalidSubject(subject)
	}
	return []Record{{Key: configKey(subject), Value: mustJSON(configValue{CompatibilityLevel: string(l)})}},
		map[string]string{"compatibility": string(l)}, nil
}

// deleteConfig decides DELETE /config[/{s}]: the answer is the level
// that was in force.
func (st *state) deleteConfig(subject string) ([]Record, any, *Error) {
	old := st.level(subject)
	if _, ok := st.configs[subject]; !ok {
		if subject != "" {
			// Confluent: no level of the subject's own is 40401.
			return nil, nil, errSubjectNotFound(subject)
		}
		return nil, map[string]string{"compatibilityLevel": string(old)}, nil
	}
	return []Record{{Key: configKey(subject)}}, map[string]string{"compatibilityLevel": string(old)}, nil
}

func validMode(m string) bool {
	return slices.Contains([]string{modeReadWrite, modeReadOnly, modeReadOnlyOverride, modeImport}, m)
}

// setMode decides PUT /mode[/{s}].
func (st *state) setMode(subject, mode string, force bool) ([]Record, any, *Error) {
	if strings.IndexFunc(subject, unicode.IsControl) >= 0 {
		return nil, nil, errInvalidSubject(subject)
	}
	m := strings.ToUpper(strings.TrimSpace(mode))
	if !validMode(m) {
		return nil, nil, newErr(http.StatusUnprocessableEntity, codeInvalidMode,
			"Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT")
	}
	if m == modeImport && !force && st.mode(subject) != modeImport {
		has := len(st.subjects) > 0
		if subject != "" {
			has = len(st.subjects[subject]) > 0
		}
		if has {
			return nil, nil, errNotPermitted("Cannot import since found existing subjects")
		}
	}
	return []Record{{Key: modeKey(subject), Value: mustJSON(modeValue{Mode: m})}}, map[string]string{"mode": m}, nil
}

// deleteMode decides DELETE /mode/{s}: the answer is the subject's mode
// before.
func (st *state) deleteMode(subject string) ([]Record, any, *Error) {
	m, ok := st.modes[subject]
	if !ok {
		// Confluent: no mode of the subject's own is 40401.
		return nil, nil, errSubjectNotFound(subject)
	}
	return []Record{{Key: modeKey(subject)}}, map[string]string{"mode": m}, nil
}
