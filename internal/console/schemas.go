package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-mq/sluice/internal/registry"
)

// registered is one version of a subject, as the registry's REST API
// answers it.
type registered struct {
	Subject    string `json:"subject"`
	Version    int    `json:"version"`
	ID         int    `json:"id"`
	SchemaType string `json:"schemaType"`
	Schema     string `json:"schema"`
}

type schemasData struct {
	Subjects []registered
	// Subjects whose every version is soft-deleted, which only a
	// permanent delete removes.
	SoftDeleted []registered
	// A subject deleted from its page.
	Deleted   string
	Permanent bool
	// The registry-wide compatibility level and mode, and a change of
	// one waiting for its confirmation, refused, or done.
	Compatibility, Mode setting
	ConfirmSetting      *settingRequest
	SettingError        string
	SettingDone         string
}

// Settings is what the "settings" template draws for the registry-wide
// level and mode.
func (d schemasData) Settings(csrf string) settingsView {
	return settingsView{CSRF: csrf, Confirm: d.ConfirmSetting, Error: d.SettingError, Done: d.SettingDone,
		Options: []settingOptions{{Kind: compatibilityKind, Current: d.Compatibility}, {Kind: modeKind, Current: d.Mode}}}
}

// Settings is what the "settings" template draws for the subject's level
// and mode.
func (d subjectData) Settings(csrf string) settingsView {
	return settingsView{CSRF: csrf, Subject: d.Subject, Confirm: d.ConfirmSetting, Error: d.SettingError, Done: d.SettingDone,
		Options: []settingOptions{{Kind: compatibilityKind, Subject: d.Subject, Current: d.Compatibility}, {Kind: modeKind, Subject: d.Subject, Current: d.Mode}}}
}

var errNoRegistry = errors.New("the schema registry is off on this broker (schema_registry.listen)")

// The registry answers as the session's principal (the console's registry
// handler authorizes each request as on the registry's own listener):
// /subjects lists only the subjects that principal may read.
func (c *Console) schemas(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "schemas", "Schemas", schemasData{}, errNoRegistry)
		return
	}
	d, err := c.loadSchemas(r, s)
	d.Deleted, d.Permanent = r.URL.Query().Get("deleted"), r.URL.Query().Get("permanent") == "true"
	d.SettingDone = settingDone(r.URL.Query())
	c.page(w, s, http.StatusOK, "schemas", "Schemas", d, err)
}

// loadSchemas reads the subjects the session may read, with their latest
// versions, and the registry-wide level and mode.
func (c *Console) loadSchemas(r *http.Request, s *session) (schemasData, error) {
	var d schemasData
	var live, all []string
	_, err := c.callOn(c.registry, r, s, "GET", "/subjects", nil, &live)
	if err == nil {
		_, err = c.callOn(c.registry, r, s, "GET", "/subjects?deleted=true", nil, &all)
	}
	isLive := map[string]bool{}
	for _, sub := range live {
		isLive[sub] = true
	}
	for _, sub := range all {
		var v registered
		q := ""
		if !isLive[sub] {
			q = "?deleted=true"
		}
		if _, err := c.callOn(c.registry, r, s, "GET", "/subjects/"+url.PathEscape(sub)+"/versions/latest"+q, nil, &v); err != nil {
			continue
		}
		if v.SchemaType == "" {
			v.SchemaType = "AVRO"
		}
		if isLive[sub] {
			d.Subjects = append(d.Subjects, v)
		} else {
			d.SoftDeleted = append(d.SoftDeleted, v)
		}
	}
	d.Compatibility = c.loadSetting(r, s, compatibilityKind, "")
	d.Mode = c.loadSetting(r, s, modeKind, "")
	return d, err
}

type subjectData struct {
	Subject string
	// Refused: the principal may not read the subject (403 from the
	// registry); the page shows nothing of it.
	Refused bool
	// Versions are the live versions, Deleted the soft-deleted ones;
	// SubjectDeleted: every version is soft-deleted.
	Versions, Deleted []int
	SubjectDeleted    bool
	Shown, Other      registered
	ShownDeleted      bool // Shown is a soft-deleted version
	Diff              []diffLine
	// The subject's compatibility level and mode, its own or inherited.
	Compatibility, Mode setting
	// A level or mode change waiting for its confirmation, refused, or
	// done.
	ConfirmSetting *settingRequest
	SettingError   string
	SettingDone    string
	CheckResult    string
	CheckMessages  []string
	// A registration's outcome: the id registered, or the refusal.
	Registered       string
	RegisterError    string
	RegisterMessages []string
	// The candidate as typed, kept when it is refused.
	Candidate, CandidateType string
	// Confirm is a delete waiting for its confirmation; Done says what a
	// delete did.
	Confirm *deleteRequest
	Done    string
}

// loadSubject reads subject's versions (live and soft-deleted), the shown
// one (version, "" for the latest; soft-deleted ones too) and its
// compatibility level. A 403 sets Refused; the error and the registry's
// status are returned for the page.
func (c *Console) loadSubject(r *http.Request, s *session, sub, version string) (subjectData, int, error) {
	d := subjectData{Subject: sub}
	base := "/subjects/" + url.PathEscape(sub)
	var all []int
	code, err := c.callOn(c.registry, r, s, "GET", base+"/versions?deleted=true", nil, &all)
	if err != nil {
		if code == http.StatusForbidden {
			d.Refused = true
			err = fmt.Errorf("refused: %w (reading a subject needs DESCRIBE on topic %s, docs/schema-registry.md)", err, registry.SubjectTopic(sub))
		}
		return d, code, err
	}
	if _, err := c.callOn(c.registry, r, s, "GET", base+"/versions", nil, &d.Versions); err != nil {
		d.SubjectDeleted = true
	}
	live := map[int]bool{}
	for _, v := range d.Versions {
		live[v] = true
	}
	for _, v := range all {
		if !live[v] {
			d.Deleted = append(d.Deleted, v)
		}
	}
	if version == "" {
		version = "latest"
	}
	if _, err := c.callOn(c.registry, r, s, "GET", base+"/versions/"+url.PathEscape(version)+"?deleted=true", nil, &d.Shown); err != nil {
		return d, http.StatusOK, err
	}
	d.ShownDeleted = !live[d.Shown.Version]
	d.Compatibility = c.loadSetting(r, s, compatibilityKind, sub)
	d.Mode = c.loadSetting(r, s, modeKind, sub)
	return d, http.StatusOK, nil
}

func (c *Console) subject(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "subject", "Schemas", subjectData{}, errNoRegistry)
		return
	}
	sub := r.PathValue("subject")
	q := r.URL.Query()
	d, code, err := c.loadSubject(r, s, sub, q.Get("version"))
	d.Registered = q.Get("registered")
	d.Done = doneMessage(q)
	d.SettingDone = settingDone(q)
	if err == nil {
		if other := q.Get("diff"); other != "" {
			if _, err := c.callOn(c.registry, r, s, "GET", "/subjects/"+url.PathEscape(sub)+"/versions/"+url.PathEscape(other)+"?deleted=true", nil, &d.Other); err == nil {
				d.Diff = diffLines(pretty(d.Other.Schema), pretty(d.Shown.Schema))
			}
		}
	}
	c.page(w, s, code, "subject", sub, d, err)
}

// checkCompatibility tests a candidate schema against the subject's latest
// version (POST /compatibility/..., verbose).
func (c *Console) checkCompatibility(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "subject", "Schemas", subjectData{}, errNoRegistry)
		return
	}
	sub := r.PathValue("subject")
	body := map[string]any{"schema": r.PostFormValue("schema")}
	if t := r.PostFormValue("schemaType"); t != "" && t != "AVRO" {
		body["schemaType"] = t
	}
	var res struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages"`
	}
	code, cerr := c.callOn(c.registry, r, s, "POST", "/compatibility/subjects/"+url.PathEscape(sub)+"/versions/latest?verbose=true", body, &res)
	// Show the subject page with the verdict.
	d, lcode, err := c.loadSubject(r, s, sub, "")
	d.Candidate, d.CandidateType = r.PostFormValue("schema"), r.PostFormValue("schemaType")
	switch {
	case d.Refused:
		c.page(w, s, lcode, "subject", sub, d, err)
		return
	case cerr != nil:
		c.page(w, s, max(code, http.StatusBadRequest), "subject", sub, d, cerr)
		return
	}
	d.CheckMessages = res.Messages
	d.CheckResult = "incompatible"
	if res.IsCompatible {
		d.CheckResult = "compatible"
	}
	c.page(w, s, http.StatusOK, "subject", sub, d, err)
}

// pretty re-indents JSON schema text (Avro, JSON Schema) for reading and
// diffing; other text (Protobuf) is kept.
func pretty(text string) []string {
	if out, ok := indentJSON(text); ok {
		text = out
	}
	return strings.Split(text, "\n")
}

type diffLine struct {
	Op   string // " ", "-", "+"
	Text string
}

// diffLines is a line diff (longest common subsequence) of a and b; inputs
// past 2,000 lines are compared as a whole replacement.
func diffLines(a, b []string) []diffLine {
	if len(a) > 2000 || len(b) > 2000 {
		var out []diffLine
		for _, l := range a {
			out = append(out, diffLine{"-", l})
		}
		for _, l := range b {
			out = append(out, diffLine{"+", l})
		}
		return out
	}
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, diffLine{" ", a[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{"-", a[i]})
			i++
		default:
			out = append(out, diffLine{"+", b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{"-", a[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{"+", b[j]})
	}
	return out
}

// indentJSON re-indents JSON text.
func indentJSON(text string) (string, bool) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(text), "", "  "); err != nil {
		return "", false
	}
	return buf.String(), true
}
