package registry

import (
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
)

// filtered are the subject's versions f takes, sorted.
func (st *state) filtered(subject string, f lookupFilter) []*version {
	var out []*version
	for _, v := range st.subjects[subject] {
		switch {
		case f == lookupDeleted, f == lookupDefault && !v.deleted, f == lookupOnlyDead && v.deleted:
			out = append(out, v)
		}
	}
	return out
}

// subjectList lists the subjects starting with prefix that have a version
// f takes, sorted (GET /subjects).
func (st *state) subjectList(prefix string, f lookupFilter) []string {
	out := []string{}
	for s := range st.subjects {
		if strings.HasPrefix(s, prefix) && len(st.filtered(s, f)) > 0 {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// metadataID answers GET /v1/metadata/id as Confluent does: the Kafka
// cluster the registry stores in, and the registry's own cluster name.
func (r *Registry) metadataID() any {
	type scope struct {
		Path     []string          `json:"path"`
		Clusters map[string]string `json:"clusters"`
	}
	return map[string]scope{"scope": {Path: []string{}, Clusters: map[string]string{
		"kafka-cluster":           r.cfg.ClusterID,
		"schema-registry-cluster": "schema-registry",
	}}}
}

// serverVersion answers GET /v1/metadata/version: the binary's module
// version and VCS revision, as far as the build recorded them.
func serverVersion() any {
	out := map[string]string{"version": "unknown", "commitId": "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			out["version"] = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				out["commitId"] = s.Value
			}
		}
	}
	return out
}

// subjectFilter keeps the usages of ?subject= when it is given, as
// Confluent's /schemas/ids/{id}/subjects and /versions do.
func subjectFilter(req *http.Request, us []usage) []usage {
	s := req.URL.Query().Get("subject")
	if s == "" {
		return us
	}
	out := []usage{}
	for _, u := range us {
		if u.Subject == s {
			out = append(out, u)
		}
	}
	return out
}

// The media types answers may have, with Confluent's server-side weights.
var produced = []struct {
	typ string
	qs  float64
}{{ContentType, 1}, {"application/vnd.schemaregistry+json", 0.9}, {"application/json", 0.5}}

// negotiate picks the answer's media type for an Accept header as
// Confluent's Jersey does (the client's q, then the server's weight); ""
// when the client accepts none of them.
func negotiate(accept string) string {
	if strings.TrimSpace(accept) == "" {
		return ContentType
	}
	best, bestQ := "", 0.0
	for _, p := range produced {
		q, spec := 0.0, -1
		for _, r := range strings.Split(accept, ",") {
			parts := strings.Split(r, ";")
			mt := strings.ToLower(strings.TrimSpace(parts[0]))
			rq := 1.0
			for _, param := range parts[1:] {
				k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
				if strings.TrimSpace(k) == "q" {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						rq = f
					}
				}
			}
			s := -1 // how specific the range is: the most specific one counts
			switch {
			case mt == p.typ:
				s = 2
			case mt == "application/*":
				s = 1
			case mt == "*/*" || mt == "*":
				s = 0
			}
			if s > spec {
				q, spec = rq, s
			}
		}
		// Jersey ranks by the client's q first, then by the server's
		// weight: produced is in descending weight, so the first of a q
		// wins.
		if q > bestQ {
			best, bestQ = p.typ, q
		}
	}
	return best
}

// negotiated sets each answer's Content-Type from the request's Accept
// header, and answers 406 when none is acceptable.
func negotiated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mt := negotiate(req.Header.Get("Accept"))
		if mt == "" {
			writeError(w, newErr(http.StatusNotAcceptable, http.StatusNotAcceptable, "HTTP 406 Not Acceptable"))
			return
		}
		w.Header().Set("Content-Type", mt)
		h.ServeHTTP(w, req)
	})
}

// setContentType sets the registry's media type unless negotiated already.
func setContentType(w http.ResponseWriter) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", ContentType)
	}
}
