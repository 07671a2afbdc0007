package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
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
}

var errNoRegistry = errors.New("the schema registry is off on this broker (schema_registry.listen)")

func (c *Console) schemas(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "schemas", "Schemas", schemasData{}, errNoRegistry)
		return
	}
	var subjects []string
	_, err := c.callOn(c.registry, r, s, "GET", "/subjects", nil, &subjects)
	var d schemasData
	for _, sub := range subjects {
		var v registered
		if _, err := c.callOn(c.registry, r, s, "GET", "/subjects/"+url.PathEscape(sub)+"/versions/latest", nil, &v); err == nil {
			if v.SchemaType == "" {
				v.SchemaType = "AVRO"
			}
			d.Subjects = append(d.Subjects, v)
		}
	}
	c.page(w, s, http.StatusOK, "schemas", "Schemas", d, err)
}

type subjectData struct {
	Subject       string
	Versions      []int
	Shown, Other  registered
	Diff          []diffLine
	Compatibility string
	CheckResult   string
	CheckMessages []string
	// A registration's outcome: the id registered, or the refusal.
	Registered       string
	RegisterError    string
	RegisterMessages []string
	// The candidate as typed, kept when it is refused.
	Candidate, CandidateType string
}

func (c *Console) subject(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "subject", "Schemas", subjectData{}, errNoRegistry)
		return
	}
	sub := r.PathValue("subject")
	d := subjectData{Subject: sub, Registered: r.URL.Query().Get("registered")}
	base := "/subjects/" + url.PathEscape(sub)
	code, err := c.callOn(c.registry, r, s, "GET", base+"/versions", nil, &d.Versions)
	if err != nil {
		c.page(w, s, code, "subject", sub, d, err)
		return
	}
	version := r.URL.Query().Get("version")
	if version == "" {
		version = "latest"
	}
	if _, err := c.callOn(c.registry, r, s, "GET", base+"/versions/"+url.PathEscape(version), nil, &d.Shown); err != nil {
		c.page(w, s, http.StatusOK, "subject", sub, d, err)
		return
	}
	var cfg struct {
		CompatibilityLevel string `json:"compatibilityLevel"`
	}
	c.callOn(c.registry, r, s, "GET", "/config/"+url.PathEscape(sub)+"?defaultToGlobal=true", nil, &cfg)
	d.Compatibility = cfg.CompatibilityLevel
	if other := r.URL.Query().Get("diff"); other != "" {
		if _, err := c.callOn(c.registry, r, s, "GET", base+"/versions/"+url.PathEscape(other), nil, &d.Other); err == nil {
			d.Diff = diffLines(pretty(d.Other.Schema), pretty(d.Shown.Schema))
		}
	}
	c.page(w, s, http.StatusOK, "subject", sub, d, nil)
}

// checkCompatibility tests a candidate schema against the subject's latest
// version (POST /compatibility/..., verbose).
func (c *Console) checkCompatibility(w http.ResponseWriter, r *http.Request, s *session) {
	sub := r.PathValue("subject")
	body := map[string]any{"schema": r.PostFormValue("schema")}
	if t := r.PostFormValue("schemaType"); t != "" && t != "AVRO" {
		body["schemaType"] = t
	}
	var res struct {
		IsCompatible bool     `json:"is_compatible"`
		Messages     []string `json:"messages"`
	}
	_, err := c.callOn(c.registry, r, s, "POST", "/compatibility/subjects/"+url.PathEscape(sub)+"/versions/latest?verbose=true", body, &res)
	if err != nil {
		c.page(w, s, http.StatusOK, "subject", sub, subjectData{Subject: sub}, err)
		return
	}
	// Show the subject page with the verdict.
	d := subjectData{Subject: sub, CheckMessages: res.Messages, Candidate: r.PostFormValue("schema"), CandidateType: r.PostFormValue("schemaType")}
	d.CheckResult = "incompatible"
	if res.IsCompatible {
		d.CheckResult = "compatible"
	}
	c.callOn(c.registry, r, s, "GET", "/subjects/"+url.PathEscape(sub)+"/versions", nil, &d.Versions)
	c.callOn(c.registry, r, s, "GET", "/subjects/"+url.PathEscape(sub)+"/versions/latest", nil, &d.Shown)
	c.page(w, s, http.StatusOK, "subject", sub, d, nil)
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
