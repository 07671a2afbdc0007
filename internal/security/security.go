package security

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/quota"
	"github.com/sluice-mq/sluice/internal/scram"
)

// Credentials keeps SCRAM credentials (scram.Store).
type Credentials interface {
	Describe(ctx context.Context, users []string) (map[string][]scram.Credential, map[string]error, error)
	Alter(ctx context.Context, dels []scram.Deletion, ups []scram.Upsertion) map[string]error
}

// ACLs keeps ACL bindings (acl.Authorizer).
type ACLs interface {
	Enabled() bool
	Describe(f acl.Filter) ([]acl.Binding, error)
	Create(ctx context.Context, bs []acl.Binding) []error
	Delete(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, []error)
}

// Quotas keeps client quotas (quota.Manager).
type Quotas interface {
	Describe(filters []quota.Filter, strict bool) ([]quota.Described, error)
	Alter(ctx context.Context, entity quota.Entity, ops []quota.Op, validateOnly bool) error
}

// Service serves /v1/security.
type Service struct {
	creds  Credentials
	acls   ACLs
	quotas Quotas
	guard  *adminapi.Guard
}

// New returns the service.
func New(creds Credentials, acls ACLs, quotas Quotas, guard *adminapi.Guard) *Service {
	return &Service{creds: creds, acls: acls, quotas: quotas, guard: guard}
}

// maxBody bounds a request body.
const maxBody = 64 << 10

// Handler serves:
//
//	GET  /v1/security/users              SCRAM users and their mechanisms
//	POST /v1/security/users              create or change a user's credential
//	POST /v1/security/users/{user}/delete   delete a user's credentials
//	GET  /v1/security/acls               ACL bindings
//	POST /v1/security/acls               create a binding
//	POST /v1/security/acls/delete        delete the bindings a filter selects
//	GET  /v1/security/quotas             client quotas
//	POST /v1/security/quotas             set or remove an entity's quotas
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/security/users", s.listUsers)
	mux.HandleFunc("POST /v1/security/users", s.upsertUser)
	mux.HandleFunc("POST /v1/security/users/{user}/delete", s.deleteUser)
	mux.HandleFunc("GET /v1/security/acls", s.listACLs)
	mux.HandleFunc("POST /v1/security/acls", s.createACL)
	mux.HandleFunc("POST /v1/security/acls/delete", s.deleteACLs)
	mux.HandleFunc("GET /v1/security/quotas", s.listQuotas)
	mux.HandleFunc("POST /v1/security/quotas", s.alterQuotas)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.guard.Allow(w, r, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, acl.ClusterName) {
			mux.ServeHTTP(w, r)
		}
	})
}

// decode reads a JSON body into v, refusing unknown fields.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		adminapi.Error(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// status maps the stores' errors onto HTTP codes.
func status(err error) int {
	switch {
	case errors.Is(err, scram.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, scram.ErrStorage), errors.Is(err, acl.ErrStorage):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// User is one SCRAM user.
type User struct {
	User       string      `json:"user"`
	Mechanisms []Mechanism `json:"mechanisms"`
}

// Mechanism is one of a user's credentials.
type Mechanism struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func (s *Service) listUsers(w http.ResponseWriter, r *http.Request) {
	all, _, err := s.creds.Describe(r.Context(), nil)
	if err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	out := []User{}
	for u, cs := range all {
		us := User{User: u}
		for _, c := range cs {
			us.Mechanisms = append(us.Mechanisms, Mechanism{Mechanism: scram.MechanismName(c.Mechanism), Iterations: c.Iterations})
		}
		out = append(out, us)
	}
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.User, b.User) })
	adminapi.JSON(w, http.StatusOK, map[string]any{"users": out})
}

// UserRequest creates or changes a user's credential for one mechanism.
type UserRequest struct {
	User       string `json:"user"`
	Password   string `json:"password"`
	Mechanism  string `json:"mechanism"`  // SCRAM-SHA-256 or SCRAM-SHA-512 (default)
	Iterations int32  `json:"iterations"` // default 4096
}

func mechanism(name string) (int8, error) {
	switch strings.ToUpper(name) {
	case "", "SCRAM-SHA-512":
		return scram.SHA512, nil
	case "SCRAM-SHA-256":
		return scram.SHA256, nil
	}
	return 0, fmt.Errorf("%w: %q (SCRAM-SHA-256 or SCRAM-SHA-512)", scram.ErrUnsupportedMechanism, name)
}

func (s *Service) upsertUser(w http.ResponseWriter, r *http.Request) {
	var req UserRequest
	if !decode(w, r, &req) {
		return
	}
	m, err := mechanism(req.Mechanism)
	if err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.User == "" || req.Password == "" {
		adminapi.Error(w, http.StatusBadRequest, "a user needs a name and a password")
		return
	}
	if req.Iterations == 0 {
		req.Iterations = scram.DefaultIterations
	}
	if req.Iterations < scram.MinIterations || req.Iterations > scram.MaxIterations {
		adminapi.Error(w, http.StatusBadRequest, fmt.Sprintf("iterations %d: between %d and %d", req.Iterations, scram.MinIterations, scram.MaxIterations))
		return
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	sp, err := scram.SaltedPassword(m, req.Password, salt, int(req.Iterations))
	if err != nil {
		adminapi.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	errs := s.creds.Alter(r.Context(), nil, []scram.Upsertion{{User: req.User, Mechanism: m, Iterations: req.Iterations, Salt: salt, SaltedPassword: sp}})
	if err := errs[req.User]; err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"user": req.User, "mechanism": scram.MechanismName(m)})
}

// deleteUser deletes the user's credentials: of ?mechanism=M, else all.
func (s *Service) deleteUser(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	var dels []scram.Deletion
	if name := r.URL.Query().Get("mechanism"); name != "" {
		m, err := mechanism(name)
		if err != nil {
			adminapi.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		dels = append(dels, scram.Deletion{User: user, Mechanism: m})
	} else {
		found, errs, err := s.creds.Describe(r.Context(), []string{user})
		if err == nil {
			err = errs[user]
		}
		if err != nil {
			adminapi.Error(w, status(err), err.Error())
			return
		}
		for _, c := range found[user] {
			dels = append(dels, scram.Deletion{User: user, Mechanism: c.Mechanism})
		}
	}
	if err := s.creds.Alter(r.Context(), dels, nil)[user]; err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"deleted": user})
}
