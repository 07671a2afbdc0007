package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console serves /ui/.
type Console struct {
	api      http.Handler // the admin API, without its authentication
	registry http.Handler // the schema registry's REST API; nil: off
	guard    *adminapi.Guard
	logger   *slog.Logger
	pages    map[string]*template.Template
	key      []byte // signs the CSRF token of anonymous use
	now      func() time.Time

	mu       sync.Mutex
	sessions map[string]*session

	overviews overviewCache

	// wholeRecords lets one whole-record view (up to 8 MiB decoded) run
	// at a time: the others wait, so their memory is bounded.
	wholeRecords chan struct{}
}

type session struct {
	user    string
	csrf    string
	expires time.Time
}

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

const cookieName = "sluice_session"

// New returns the console over the admin API handler api (which must not
// authenticate itself: the console does, and passes the principal in the
// request context), the schema registry's REST handler (nil when the
// registry is off) and the listener's guard.
func New(api, registry http.Handler, guard *adminapi.Guard, logger *slog.Logger) (*Console, error) {
	c := &Console{api: api, registry: registry, guard: guard, logger: logger, now: time.Now, sessions: map[string]*session{}, pages: map[string]*template.Template{},
		wholeRecords: make(chan struct{}, 1)}
	c.key = make([]byte, 32)
	if _, err := rand.Read(c.key); err != nil {
		return nil, err
	}
	layout, err := templateFS.ReadFile("templates/layout.html")
	if err != nil {
		return nil, err
	}
	entries, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := strings.TrimSuffix(strings.TrimPrefix(e, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		body, err := templateFS.ReadFile(e)
		if err != nil {
			return nil, err
		}
		t, err := template.New(name).Funcs(funcs).Parse(string(layout))
		if err == nil {
			_, err = t.Parse(string(body))
		}
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return c, nil
}

// Handler serves the console under /ui/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.withSession(c.logout))
	c.routes(mux)
	return securityHeaders(mux)
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
		h.ServeHTTP(w, r)
	})
}

// view is what every page template gets.
type view struct {
	Title string
	User  string
	CSRF  string
	Login bool // a login is in use (show the logout button)
	Flash string
	Error string
	Data  any
}

type ctxKey struct{}

// withSession runs h with the request's session, sending the browser to
// the login page when a login is needed and missing, and checking the CSRF
// token of every POST.
func (c *Console) withSession(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.session(r)
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "login required", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) && !hmac.Equal([]byte(r.Header.Get("X-CSRF-Token")), []byte(s.csrf)) {
				http.Error(w, "bad or missing CSRF token: reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, s)), s)
	}
}

// session returns the request's session: the cookie's when a login is
// required, else the anonymous one.
func (c *Console) session(r *http.Request) *session {
	if !c.guard.Required {
		mac := hmac.New(sha256.New, c.key)
		mac.Write([]byte("anonymous"))
		return &session{user: "ANONYMOUS", csrf: base64.RawURLEncoding.EncodeToString(mac.Sum(nil))}
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s == nil || c.now().After(s.expires) {
		delete(c.sessions, ck.Value)
		return nil
	}
	return s
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.guard.Required {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, http.StatusOK, "login", view{Title: "Log in", Data: safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps a post-login redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") {
		return "/ui/"
	}
	return next
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.guard.Required {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	user, pass := r.PostFormValue("user"), r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	if user == "" || !c.guard.Check(r.Context(), user, pass) {
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Log in", Error: "wrong user or password", Data: next})
		return
	}
	id := randomToken()
	c.mu.Lock()
	now := c.now()
	for k, s := range c.sessions {
		if now.After(s.expires) {
			delete(c.sessions, k)
		}
	}
	c.sessions[id] = &session{user: user, csrf: randomToken(), expires: now.Add(sessionTTL)}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL.Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// call runs one admin API request in process as s's principal and decodes
// a 2xx JSON answer into out; otherwise it returns the API's message.
func (c *Console) call(r *http.Request, s *session, method, path string, body any, out any) (int, error) {
	return c.callOn(c.api, r, s, method, path, body, out)
}

// callOn is call against handler h.
func (c *Console) callOn(h http.Handler, r *http.Request, s *session, method, path string, body any, out any) (int, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(adminapi.WithPrincipal(r.Context(), s.user), method, path, rd)
	if err != nil {
		return 0, err
	}
	req.RemoteAddr = r.RemoteAddr
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, req)
	if rec.code >= 300 {
		var e struct {
			Error     string `json:"error"`
			Message   string `json:"message"`    // the schema registry's
			ErrorCode int    `json:"error_code"` // the schema registry's
		}
		if json.Unmarshal(rec.body.Bytes(), &e) == nil && (e.Error != "" || e.Message != "") {
			return rec.code, &apiError{Code: e.ErrorCode, Message: e.Error + e.Message}
		}
		return rec.code, fmt.Errorf("%s %s: %d", method, path, rec.code)
	}
	if out != nil {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return rec.code, err
		}
	}
	return rec.code, nil
}

// apiError is a refusal of the admin API or the schema registry: its
// message, and the registry's error code (e.g. 40301, 42203; 0 from the
// admin API).
type apiError struct {
	Code    int
	Message string
}

func (e *apiError) Error() string { return e.Message }

// recorder is an in-memory http.ResponseWriter.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

func (c *Console) render(w http.ResponseWriter, code int, page string, v view) {
	t := c.pages[page]
	if t == nil {
		http.Error(w, "no page "+page, http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.logger.Error("console: rendering", "page", page, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}
