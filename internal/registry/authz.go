package registry

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AuthorizeFunc reports whether principal ("User:name") connecting from
// host may do op on a resource, as the broker's ACLs decide it (super users
// and a disabled authorizer allow everything).
type AuthorizeFunc func(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool

// clusterName is the CLUSTER resource's name in Kafka ACLs.
const clusterName = "kafka-cluster"

// codeForbidden is Confluent's error code of a request the user may not make.
const codeForbidden = 40301

// Kafka ACLs have no subject resource, so a subject is authorized through
// the topic it belongs to under TopicNameStrategy: the subject less its
// -key or -value suffix (any other subject is its own topic name):
//
//   - reading a subject (its versions, schemas, lookups, compatibility
//     tests, its own config and mode) needs DESCRIBE on the topic, which
//     READ and WRITE imply;
//   - registering under it needs WRITE on the topic;
//   - deleting versions and changing its config or mode need ALTER on the
//     topic;
//   - changing the global config or mode needs ALTER_CONFIGS on the
//     cluster; reading them, and GET /, /schemas/types, needs nothing more
//     than authentication;
//   - a schema by id is readable when one of the subjects it is registered
//     under (soft-deleted versions included) is; lists (/subjects,
//     /schemas, /schemas/ids/{id}/subjects and /versions) show only the
//     subjects the principal may read.
//
// docs/schema-registry.md says the same for users.

// SubjectTopic is the topic a subject belongs to under TopicNameStrategy.
func SubjectTopic(subject string) string {
	for _, suffix := range []string{"-key", "-value"} {
		if t, ok := strings.CutSuffix(subject, suffix); ok && t != "" {
			return t
		}
	}
	return subject
}

// access is the authenticated principal of a request, carried in its
// context for the handlers that filter by subject.
type access struct {
	principal, host string
	authorize       AuthorizeFunc
}

type accessKey struct{}

func (a *access) may(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return a.authorize(a.principal, a.host, op, rt, name)
}

// canRead reports whether the request may read subject (true without
// authorization).
func canRead(req *http.Request, subject string) bool {
	a, _ := req.Context().Value(accessKey{}).(*access)
	return a == nil || a.may(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, SubjectTopic(subject))
}

// readable keeps the subjects the request may read.
func readable(req *http.Request, subjects []string) []string {
	if req.Context().Value(accessKey{}) == nil {
		return subjects
	}
	out := []string{}
	for _, s := range subjects {
		if canRead(req, s) {
			out = append(out, s)
		}
	}
	return out
}

// readableUsages keeps the subject versions the request may read.
func readableUsages(req *http.Request, us []usage) []usage {
	out := []usage{}
	for _, u := range us {
		if canRead(req, u.Subject) {
			out = append(out, u)
		}
	}
	return out
}

// idReadable answers 403 unless the request may read a subject schema id
// is registered under (soft-deleted versions included).
func idReadable(req *http.Request, st *state, id int) *Error {
	a, _ := req.Context().Value(accessKey{}).(*access)
	if a == nil {
		return nil
	}
	for s := range st.usedBy[id] {
		if canRead(req, s) {
			return nil
		}
	}
	return newErr(http.StatusForbidden, codeForbidden, "User %s is denied operation DESCRIBE on the topics of schema %d's subjects", a.principal, id)
}

// authorizeRequest wraps h: a request about a subject, or changing the
// global config or mode, goes on only when the principal may do it (see
// the rules above); the others go on with the principal in their context
// for the handlers' filtering.
func authorizeRequest(h http.Handler, user string, authorize AuthorizeFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host := req.RemoteAddr
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		a := &access{principal: "User:" + user, host: host, authorize: authorize}
		op, rt, name, ok := requiredAccess(req)
		if ok && !a.may(op, rt, name) {
			writeError(w, newErr(http.StatusForbidden, codeForbidden, "User %s is denied operation %s on %s %s",
				a.principal, op, rt, name))
			return
		}
		h.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), accessKey{}, a)))
	})
}

// HandlerAs is the REST API for a caller that authenticates its users
// itself (the broker's web console): each request is authorized, by the
// rules above, as the user that user names for it, exactly as the same
// user's request on the registry's listener would be. Without authorize
// nothing is checked, as Handler(nil).
func (r *Registry) HandlerAs(user func(*http.Request) string, authorize AuthorizeFunc) http.Handler {
	h := r.Handler(nil)
	if authorize == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		authorizeRequest(h, user(req), authorize).ServeHTTP(w, req)
	})
}

// requiredAccess is what a request needs by its path and method; ok is
// false for requests checked by their handler or needing nothing. Paths
// that no route serves need nothing: they are answered 404.
func requiredAccess(req *http.Request) (op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, ok bool) {
	parts := strings.Split(strings.Trim(req.URL.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	read := req.Method == http.MethodGet || req.Method == http.MethodHead
	topic := func(op kmsg.ACLOperation, subject string) (kmsg.ACLOperation, kmsg.ACLResourceType, string, bool) {
		return op, kmsg.ACLResourceTypeTopic, SubjectTopic(subject), true
	}
	switch {
	case len(parts) >= 2 && parts[0] == "subjects":
		switch {
		case read, req.Method == http.MethodPost && len(parts) == 2: // a lookup
			return topic(kmsg.ACLOperationDescribe, parts[1])
		case req.Method == http.MethodPost:
			return topic(kmsg.ACLOperationWrite, parts[1])
		}
		return topic(kmsg.ACLOperationAlter, parts[1])
	case len(parts) >= 3 && parts[0] == "compatibility" && parts[1] == "subjects":
		return topic(kmsg.ACLOperationDescribe, parts[2])
	case len(parts) == 2 && (parts[0] == "config" || parts[0] == "mode"):
		if read {
			return topic(kmsg.ACLOperationDescribe, parts[1])
		}
		return topic(kmsg.ACLOperationAlter, parts[1])
	case len(parts) == 1 && (parts[0] == "config" || parts[0] == "mode") && !read:
		return kmsg.ACLOperationAlterConfigs, kmsg.ACLResourceTypeCluster, clusterName, true
	}
	return 0, 0, "", false
}

// indexUse sets whether subject has a version of id, soft-deleted or not,
// in usedBy. mu held.
func (st *state) indexUse(subject string, id int) {
	for _, v := range st.subjects[subject] {
		if v.id == id {
			if st.usedBy == nil {
				st.usedBy = map[int]map[string]struct{}{}
			}
			if st.usedBy[id] == nil {
				st.usedBy[id] = map[string]struct{}{}
			}
			st.usedBy[id][subject] = struct{}{}
			return
		}
	}
	delete(st.usedBy[id], subject)
	if len(st.usedBy[id]) == 0 {
		delete(st.usedBy, id)
	}
}
