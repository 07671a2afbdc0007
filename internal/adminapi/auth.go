package adminapi

import (
	"context"
	"net"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer is the ACL check the Kafka listeners use (internal/acl).
type Authorizer interface {
	Enabled() bool
	Authorized(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
}

// Guard applies the broker's security to the admin listener: when the
// broker authenticates Kafka clients with SASL, every admin request but
// /healthz must carry the same credentials (HTTP Basic: a SASL user and its
// password), and ACLs decide what that principal may see, as for the Kafka
// APIs (docs/api.md).
type Guard struct {
	// Required: SASL is on, so requests must authenticate.
	Required bool
	// Check verifies a user's password (against the SCRAM credentials).
	Check func(ctx context.Context, user, password string) bool
	// Authz is the ACL authorizer (nil or disabled: everything allowed).
	Authz Authorizer
}

type principalKey struct{}

// Authenticate wraps h: with Required, a request (but /healthz) without
// valid Basic credentials gets 401; the principal ("ANONYMOUS" without SASL) rides in
// the request's context for Allow.
func (g *Guard) Authenticate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal := "ANONYMOUS"
		if g != nil && g.Required && r.URL.Path != "/healthz" {
			user, pass, ok := r.BasicAuth()
			if !ok || user == "" || g.Check == nil || !g.Check(r.Context(), user, pass) {
				w.Header().Set("WWW-Authenticate", `Basic realm="sluice", charset="UTF-8"`)
				Error(w, http.StatusUnauthorized, "authentication required: HTTP Basic with a SASL user and its password")
				return
			}
			principal = user
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, principal)))
	})
}

// Allow reports whether the request's principal may do op on the
// resource; it writes 403 and returns false when not.
func (g *Guard) Allow(w http.ResponseWriter, r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.Permitted(r, op, rt, name) {
		return true
	}
	Error(w, http.StatusForbidden, "User:"+Principal(r)+" may not "+op.String()+" "+rt.String()+" "+name)
	return false
}

// Principal is the request's authenticated principal name ("ANONYMOUS"
// without SASL).
func Principal(r *http.Request) string {
	if p, _ := r.Context().Value(principalKey{}).(string); p != "" {
		return p
	}
	return "ANONYMOUS"
}

// Permitted reports whether the request's principal may do op on the
// resource, writing nothing (for filtering lists).
func (g *Guard) Permitted(r *http.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g == nil || g.Authz == nil || !g.Authz.Enabled() {
		return true
	}
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return g.Authz.Authorized("User:"+Principal(r), host, op, rt, name)
}

// Require wraps h so that it runs only when the principal may do op on the
// resource that name returns for the request.
func (g *Guard) Require(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name func(*http.Request) string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Allow(w, r, op, rt, name(r)) {
			h.ServeHTTP(w, r)
		}
	})
}

// WithPrincipal returns ctx carrying principal, for a request made in
// process on a principal's behalf (the console).
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}
