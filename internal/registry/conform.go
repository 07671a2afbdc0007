package registry

import (
	"runtime/debug"
	"sort"
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
