package registry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/schema"
)

// ContentType is the media type of every answer (Confluent's).
const ContentType = "application/vnd.schemaregistry.v1+json"

// offsetHeader carries, on a write's answer, the _schemas offset after
// the write, so that a broker that forwarded it answers only once its own
// state has applied it. forwardedHeader marks a forwarded request, which
// is never forwarded again.
const (
	offsetHeader    = "Sluice-Registry-Offset"
	forwardedHeader = "Sluice-Registry-Forwarded"
)

// CheckFunc verifies HTTP Basic credentials.
type CheckFunc func(ctx context.Context, user, password string) bool

// rawText is an answer written as is (the .../schema endpoints).
type rawText string

// Handler serves the REST API (docs/schema-registry.md). With check set,
// every request must carry HTTP Basic credentials it accepts.
func (r *Registry) Handler(check CheckFunc) http.Handler { return r.AuthorizedHandler(check, nil) }

// AuthorizedHandler is Handler that, with check and authorize set, also
// authorizes each request for the subjects it touches (authz.go).
func (r *Registry) AuthorizedHandler(check CheckFunc, authorize AuthorizeFunc) http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, methods map[string]http.HandlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, req *http.Request) {
			h := methods[req.Method]
			if h == nil && req.Method == http.MethodHead {
				h = methods[http.MethodGet]
			}
			if h == nil {
				writeError(w, newErr(http.StatusMethodNotAllowed, http.StatusMethodNotAllowed, "HTTP 405 Method Not Allowed"))
				return
			}
			h(w, req)
		})
	}
	get := func(f func(*http.Request, *state) (any, *Error)) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) { r.serveRead(w, req, f) }
	}
	route("/{$}", map[string]http.HandlerFunc{"GET": get(func(*http.Request, *state) (any, *Error) { return struct{}{}, nil })})
	route("/schemas/types", map[string]http.HandlerFunc{"GET": get(func(*http.Request, *state) (any, *Error) {
		out := []string{}
		for _, t := range schema.Types() {
			out = append(out, string(t))
		}
		return out, nil
	})})
	route("/contexts", map[string]http.HandlerFunc{"GET": get(func(*http.Request, *state) (any, *Error) {
		return []string{"."}, nil // the default context only
	})})
	route("/v1/metadata/id", map[string]http.HandlerFunc{"GET": get(func(*http.Request, *state) (any, *Error) {
		return r.metadataID(), nil
	})})
	route("/v1/metadata/version", map[string]http.HandlerFunc{"GET": get(func(*http.Request, *state) (any, *Error) {
		return serverVersion(), nil
	})})
	route("/schemas", map[string]http.HandlerFunc{"GET": get(listSchemas)})
	route("/schemas/ids/{id}", map[string]http.HandlerFunc{"GET": get(r.getSchemaByID)})
	route("/schemas/ids/{id}/schema", map[string]http.HandlerFunc{"GET": get(func(req *http.Request, st *state) (any, *Error) {
		c, e := schemaOf(req, st)
		if e != nil {
			return nil, e
		}
		return rawText(c.text), nil
	})})
	route("/schemas/ids/{id}/subjects", map[string]http.HandlerFunc{"GET": get(func(req *http.Request, st *state) (any, *Error) {
		c, e := schemaOf(req, st)
		if e != nil {
			return nil, e
		}
		out := []string{}
		for _, u := range readableUsages(req, subjectFilter(req, st.usages(c.id, flag(req, "deleted")))) {
			if len(out) == 0 || out[len(out)-1] != u.Subject {
				out = append(out, u.Subject)
			}
		}
		return out, nil
	})})
	route("/schemas/ids/{id}/versions", map[string]http.HandlerFunc{"GET": get(func(req *http.Request, st *state) (any, *Error) {
		c, e := schemaOf(req, st)
		if e != nil {
			return nil, e
		}
		return readableUsages(req, subjectFilter(req, st.usages(c.id, flag(req, "deleted")))), nil
	})})
	route("/subjects", map[string]http.HandlerFunc{"GET": get(func(req *http.Request, st *state) (any, *Error) {
		return readable(req, st.subjectList(req.URL.Query().Get("subjectPrefix"), filterOf(req))), nil
	})})
	route("/subjects/{subject}", map[string]http.HandlerFunc{
		"POST": func(w http.ResponseWriter, req *http.Request) {
			sr, ok := r.decodeSchemaRequest(w, req)
			if ok {
				r.serveRead(w, req, func(req *http.Request, st *state) (any, *Error) {
					return st.lookup(req.PathValue("subject"), sr, flag(req, "deleted"))
				})
			}
		},
		"DELETE": r.serveWrite(func(req *http.Request, _ []byte) (decideFunc, *Error) {
			s, perm := req.PathValue("subject"), flag(req, "permanent")
			return func(st *state) ([]Record, any, *Error) { return st.deleteSubject(s, perm) }, nil
		}),
	})
	route("/subjects/{subject}/versions", map[string]http.HandlerFunc{
		"GET": get(func(req *http.Request, st *state) (any, *Error) {
			s, f := req.PathValue("subject"), filterOf(req)
			if len(st.live(s, f != lookupDefault)) == 0 {
				return nil, errSubjectNotFound(s)
			}
			out := []int{}
			for _, v := range st.filtered(s, f) {
				out = append(out, v.version)
			}
			return out, nil
		}),
		"POST": r.serveWrite(func(req *http.Request, body []byte) (decideFunc, *Error) {
			sr, e := parseSchemaRequest(body)
			if e != nil {
				return nil, e
			}
			s := req.PathValue("subject")
			return func(st *state) ([]Record, any, *Error) { return st.register(s, sr) }, nil
		}),
	})
	route("/subjects/{subject}/versions/{version}", map[string]http.HandlerFunc{
		"GET": get(func(req *http.Request, st *state) (any, *Error) {
			s, v, c, e := versionOf(req, st)
			if e != nil {
				return nil, e
			}
			return versionJSON(s, v, c), nil
		}),
		"DELETE": r.serveWrite(func(req *http.Request, _ []byte) (decideFunc, *Error) {
			s, v, perm := req.PathValue("subject"), req.PathValue("version"), flag(req, "permanent")
			return func(st *state) ([]Record, any, *Error) { return st.deleteVersion(s, v, perm) }, nil
		}),
	})
	route("/subjects/{subject}/versions/{version}/schema", map[string]http.HandlerFunc{"GET": get(func(req *http.Request, st *state) (any, *Error) {
		_, _, c, e := versionOf(req, st)
		if e != nil {
			return nil, e
		}
		return rawText(c.text), nil
	})})
	route("/subjects/{subject}/versions/{version}/referencedby", map[string]http.HandlerFunc{"GET": get(func(req *http.Request, st *state) (any, *Error) {
		// As Confluent: the version is looked up soft-deleted ones included.
		q := req.URL.Query()
		q.Set("deleted", "true")
		req.URL.RawQuery = q.Encode()
		s, v, _, e := versionOf(req, st)
		if e != nil {
			return nil, e
		}
		return st.referrers(s, v.version), nil
	})})
	compat := func(w http.ResponseWriter, req *http.Request) {
		sr, ok := r.decodeSchemaRequest(w, req)
		if ok {
			r.serveRead(w, req, func(req *http.Request, st *state) (any, *Error) {
				return st.checkCompatibility(req.PathValue("subject"), req.PathValue("version"), sr, flag(req, "verbose"))
			})
		}
	}
	route("/compatibility/subjects/{subject}/versions", map[string]http.HandlerFunc{"POST": compat})
	route("/compatibility/subjects/{subject}/versions/{version}", map[string]http.HandlerFunc{"POST": compat})
	for _, p := range []string{"/config", "/config/{subject}"} {
		route(p, map[string]http.HandlerFunc{
			"GET": get(func(req *http.Request, st *state) (any, *Error) {
				s := req.PathValue("subject")
				l, ok := st.configs[s]
				switch {
				case ok:
				case s == "" || flag(req, "defaultToGlobal"):
					l = st.level("")
				default:
					return nil, newErr(http.StatusNotFound, codeSubjectNoCompatibility,
						"Subject '%s' does not have subject-level compatibility configured", s)
				}
				return map[string]string{"compatibilityLevel": string(l)}, nil
			}),
			"PUT": r.serveWrite(func(req *http.Request, body []byte) (decideFunc, *Error) {
				var c struct {
					Compatibility      string `json:"compatibility"`
					CompatibilityLevel string `json:"compatibilityLevel"`
					Normalize          *bool  `json:"normalize"`
				}
				if e := decodeJSON(body, &c); e != nil {
					return nil, e
				}
				if c.Compatibility == "" {
					c.Compatibility = c.CompatibilityLevel
				}
				s := req.PathValue("subject")
				return func(st *state) ([]Record, any, *Error) {
					recs, ans, e := st.setConfig(s, c.Compatibility)
					if e == nil && c.Normalize != nil {
						// Echoed as Confluent echoes the request; sluice
						// always compares schemas normalized.
						ans = map[string]any{"compatibility": ans.(map[string]string)["compatibility"], "normalize": *c.Normalize}
					}
					return recs, ans, e
				}, nil
			}),
			"DELETE": r.serveWrite(func(req *http.Request, _ []byte) (decideFunc, *Error) {
				s := req.PathValue("subject")
				return func(st *state) ([]Record, any, *Error) { return st.deleteConfig(s) }, nil
			}),
		})
	}
	modeRoutes := map[string]http.HandlerFunc{
		"GET": get(func(req *http.Request, st *state) (any, *Error) {
			s := req.PathValue("subject")
			m, ok := st.modes[s]
			switch {
			case ok:
			case s == "" || flag(req, "defaultToGlobal"):
				m = st.mode("")
			default:
				return nil, newErr(http.StatusNotFound, codeSubjectNoMode, "Subject '%s' does not have subject-level mode configured", s)
			}
			return map[string]string{"mode": m}, nil
		}),
		"PUT": r.serveWrite(func(req *http.Request, body []byte) (decideFunc, *Error) {
			var m struct {
				Mode string `json:"mode"`
			}
			if e := decodeJSON(body, &m); e != nil {
				return nil, e
			}
			s, force := req.PathValue("subject"), flag(req, "force")
			return func(st *state) ([]Record, any, *Error) { return st.setMode(s, m.Mode, force) }, nil
		}),
	}
	route("/mode", modeRoutes)
	subjectMode := map[string]http.HandlerFunc{"GET": modeRoutes["GET"], "PUT": modeRoutes["PUT"],
		"DELETE": r.serveWrite(func(req *http.Request, _ []byte) (decideFunc, *Error) {
			s := req.PathValue("subject")
			return func(st *state) ([]Record, any, *Error) { return st.deleteMode(s) }, nil
		})}
	route("/mode/{subject}", subjectMode)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, newErr(http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found"))
	})
	if check == nil {
		return negotiated(mux)
	}
	return negotiated(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, pass, ok := req.BasicAuth()
		if !ok || user == "" || !check(req.Context(), user, pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="sluice schema registry", charset="UTF-8"`)
			writeError(w, newErr(http.StatusUnauthorized, http.StatusUnauthorized, "Unauthorized: HTTP Basic with a SASL user and its password is required"))
			return
		}
		if authorize != nil {
			authorizeRequest(mux, user, authorize).ServeHTTP(w, req)
			return
		}
		mux.ServeHTTP(w, req)
	}))
}

type decideFunc func(st *state) ([]Record, any, *Error)

// lookupFilter is which versions a list takes (Confluent's LookupFilter).
type lookupFilter int

const (
	lookupDefault  lookupFilter = iota // live versions
	lookupDeleted                      // ?deleted=true: soft-deleted ones too
	lookupOnlyDead                     // ?deletedOnly=true: soft-deleted ones only
)

// filterOf reads ?deleted and ?deletedOnly (deletedOnly wins, as in
// Confluent).
func filterOf(req *http.Request) lookupFilter {
	switch {
	case flag(req, "deletedOnly"):
		return lookupOnlyDead
	case flag(req, "deleted"):
		return lookupDeleted
	}
	return lookupDefault
}

func flag(req *http.Request, name string) bool {
	b, _ := strconv.ParseBool(req.URL.Query().Get(name))
	return b
}

// usage is one subject version of an id.
type usage struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// usages lists the subject versions with id, sorted.
func (st *state) usages(id int, deleted bool) []usage {
	out := []usage{}
	for _, s := range st.subjectNames("", deleted) {
		for _, v := range st.live(s, deleted) {
			if v.id == id {
				out = append(out, usage{s, v.version})
			}
		}
	}
	return out
}

// listSchemas answers GET /schemas: every version of every subject
// (?subjectPrefix=, ?deleted=true, ?latestOnly=true, ?offset=, ?limit=).
func listSchemas(req *http.Request, st *state) (any, *Error) {
	q := req.URL.Query()
	deleted, latestOnly := flag(req, "deleted"), flag(req, "latestOnly")
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = -1
	}
	out := []subjectVersionJSON{}
	for _, s := range readable(req, st.subjectNames(q.Get("subjectPrefix"), deleted)) {
		vs := st.live(s, deleted)
		if latestOnly {
			vs = vs[len(vs)-1:]
		}
		for _, v := range vs {
			if offset > 0 {
				offset--
				continue
			}
			if limit == 0 {
				return out, nil
			}
			out = append(out, versionJSON(s, v, st.schemas[v.id]))
			limit--
		}
	}
	return out, nil
}

func schemaOf(req *http.Request, st *state) (*content, *Error) {
	id, err := strconv.ParseInt(req.PathValue("id"), 10, 32)
	if err != nil {
		// Confluent's {id} is a Java Integer: anything else matches no
		// resource, Jersey's plain 404.
		return nil, newErr(http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found")
	}
	c := st.schemas[int(id)]
	if c == nil {
		return nil, errSchemaNotFound(int(id))
	}
	if e := idReadable(req, st, int(id)); e != nil {
		return nil, e
	}
	return c, nil
}

func (r *Registry) getSchemaByID(req *http.Request, st *state) (any, *Error) {
	c, e := schemaOf(req, st)
	if e != nil {
		return nil, e
	}
	out := struct {
		SchemaType string      `json:"schemaType,omitempty"`
		Schema     string      `json:"schema"`
		References []Reference `json:"references,omitempty"`
		MaxID      *int        `json:"maxId,omitempty"`
	}{SchemaType: typeName(c.typ), Schema: c.text, References: c.refs}
	if flag(req, "fetchMaxId") {
		out.MaxID = &st.maxID
	}
	return out, nil
}

// versionOf resolves {subject} and {version} (soft-deleted ones with
// ?deleted=true).
func versionOf(req *http.Request, st *state) (string, *version, *content, *Error) {
	s := req.PathValue("subject")
	n, e := parseVersion(req.PathValue("version"))
	if e != nil {
		return "", nil, nil, e
	}
	deleted := flag(req, "deleted")
	if len(st.live(s, deleted)) == 0 {
		return "", nil, nil, errSubjectNotFound(s)
	}
	v := st.version(s, n, deleted)
	if v == nil {
		return "", nil, nil, errVersionNotFound(n)
	}
	return s, v, st.schemas[v.id], nil
}

// serveRead answers a read from this broker's state.
func (r *Registry) serveRead(w http.ResponseWriter, req *http.Request, f func(*http.Request, *state) (any, *Error)) {
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.WriteTimeout)
	defer cancel()
	if e := r.waitReady(ctx); e != nil {
		writeError(w, e)
		return
	}
	r.mu.RLock()
	out, e := f(req, r.st)
	r.mu.RUnlock()
	if e != nil {
		writeError(w, e)
		return
	}
	writeAnswer(w, out)
}

// serveWrite answers a write: made here when this broker leads _schemas,
// forwarded to the leader when not.
func (r *Registry) serveWrite(prepare func(req *http.Request, body []byte) (decideFunc, *Error)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		body, e := r.readBody(w, req)
		if e != nil {
			writeError(w, e)
			return
		}
		decide, e := prepare(req, body)
		if e != nil {
			writeError(w, e)
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), r.cfg.WriteTimeout)
		defer cancel()
		var (
			ans  any
			next int64
			err  error
		)
		for {
			ans, next, err = r.write(ctx, decide)
			if !errors.Is(err, ErrNotLeader) {
				break
			}
			if r.fwd == nil {
				writeError(w, newErr(http.StatusInternalServerError, codeUnknownLeader, "Unknown leader: this broker does not lead %s", Topic))
				return
			}
			base, ferr := r.fwd.LeaderURL(ctx)
			if ferr == nil && req.Header.Get(forwardedHeader) != "" {
				// Leadership moved while the request travelled: the
				// broker that forwarded it asks again who leads.
				writeError(w, newErr(http.StatusInternalServerError, codeUnknownLeader, "Unknown leader: this broker does not lead %s", Topic))
				return
			}
			if ferr == nil && r.forward(ctx, w, req, base, body) {
				return
			}
			if ferr != nil && !errors.Is(ferr, ErrNoLeader) {
				writeError(w, newErr(http.StatusInternalServerError, codeUnknownLeader, "Unknown leader: %v", ferr))
				return
			}
			// No leader yet, this broker is taking the leadership over
			// (the forwarding broker already counts it as the leader),
			// or the leader could not be reached or had just lost the
			// leadership: try again shortly.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				writeError(w, newErr(http.StatusInternalServerError, codeUnknownLeader, "Unknown leader: no broker leads %s", Topic))
				return
			}
		}
		if err != nil {
			var re *Error
			if !errors.As(err, &re) {
				re = errStore(err)
			}
			writeError(w, re)
			return
		}
		w.Header().Set(offsetHeader, strconv.FormatInt(next, 10))
		writeAnswer(w, ans)
	}
}

// readBody reads a request body up to MaxBodyBytes, of a media type
// Confluent takes.
func (r *Registry) readBody(w http.ResponseWriter, req *http.Request) ([]byte, *Error) {
	if ct := req.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return nil, newErr(http.StatusUnsupportedMediaType, http.StatusUnsupportedMediaType, "HTTP 415 Unsupported Media Type: %q", ct)
		case mt == ContentType, mt == "application/vnd.schemaregistry+json", mt == "application/json",
			mt == "application/octet-stream":
		default:
			return nil, newErr(http.StatusUnsupportedMediaType, http.StatusUnsupportedMediaType, "HTTP 415 Unsupported Media Type: %q", ct)
		}
	}
	// The body is held until the request is answered; what all requests
	// may hold at once is bounded. A body of unknown length counts as the
	// largest allowed.
	n := r.cfg.MaxBodyBytes
	if req.ContentLength >= 0 && req.ContentLength < n {
		n = req.ContentLength
	}
	if err := r.bodies.Acquire(req.Context(), n); err != nil {
		return nil, errTimeout("waiting for memory to read the request body")
	}
	context.AfterFunc(req.Context(), func() { r.bodies.Release(n) })
	b, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newErr(http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge,
				"Request body larger than %d bytes", r.cfg.MaxBodyBytes)
		}
		return nil, errBadRequest("Reading the request body failed: %v", err)
	}
	return b, nil
}

func (r *Registry) decodeSchemaRequest(w http.ResponseWriter, req *http.Request) (*schemaRequest, bool) {
	body, e := r.readBody(w, req)
	if e == nil {
		var sr *schemaRequest
		if sr, e = parseSchemaRequest(body); e == nil {
			return sr, true
		}
	}
	writeError(w, e)
	return nil, false
}

func parseSchemaRequest(body []byte) (*schemaRequest, *Error) {
	var sr schemaRequest
	if e := decodeJSON(body, &sr); e != nil {
		return nil, e
	}
	if sr.ID > math.MaxInt32 || sr.ID < math.MinInt32 || sr.Version > math.MaxInt32 || sr.Version < math.MinInt32 {
		// Java Integers in Confluent: Jackson's mapping error, 400.
		return nil, errBadRequest("Numeric value out of range of int")
	}
	return &sr, nil
}

func decodeJSON(body []byte, v any) *Error {
	if len(strings.TrimSpace(string(body))) == 0 {
		// Confluent's resources take a @NotNull body: a constraint
		// violation, 422 with error_code 422.
		return newErr(http.StatusUnprocessableEntity, http.StatusUnprocessableEntity, "The request body may not be empty")
	}
	if err := strictJSON(body, v); err != nil {
		// As Confluent's JSON parse and mapping errors: 400.
		return errBadRequest("Unparsable JSON body: %v", err)
	}
	return nil
}

func writeAnswer(w http.ResponseWriter, v any) {
	setContentType(w)
	if s, ok := v.(rawText); ok {
		io.WriteString(w, string(s))
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errStore(err))
		return
	}
	w.Write(b)
}

func writeError(w http.ResponseWriter, e *Error) {
	setContentType(w)
	w.WriteHeader(e.Status)
	b, _ := json.Marshal(e)
	w.Write(b)
}
