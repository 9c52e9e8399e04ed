// Package dashboard is belay's web dashboard: the approval inbox, sessions,
// their timelines, diffs and rollback, and search, served by `belay serve`
// at /.
//
// It is server-rendered with html/template (which escapes every value) and
// uses a small vendored htmx for partial updates; live updates come from
// belay.Service.Follow over Server-Sent Events. It calls belay.Service only,
// as the signed-in user (belay.WithActor), so it can do no more than that
// user's API token allows.
//
// A person signs in with an API token; the sign-in (the token, a CSRF token,
// the user and when it ends) is sealed with AES-GCM into an HttpOnly,
// SameSite=Strict cookie. The key comes from Options.Key, which `belay serve`
// keeps in the database, so every instance behind a load balancer opens any
// instance's cookies and sign-ins survive restarts. Every request
// authenticates the token again (a revoked token ends its sign-ins at once);
// signing out is recorded through SignOuts (in the database, for every
// instance), so a copy of the cookie is refused too. Every POST needs the
// sign-in's CSRF token and passes a cross-origin check.
package dashboard

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/reqlog"
)

//go:embed static
var staticFS embed.FS

//go:embed templates/*.html
var templateFS embed.FS

// CookieName is the sign-in cookie's name.
const CookieName = "belay_dashboard"

// flashCookie carries a one-time message to the next page.
const flashCookie = "belay_dashboard_flash"

// KeySize is the length of Options.Key.
const KeySize = 32

// csrfHeader carries the CSRF token on htmx requests.
const csrfHeader = "X-CSRF-Token"

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 12 * time.Hour

// Options configure the dashboard.
type Options struct {
	Service belay.Service
	// Authenticate turns an API token into the identity it stands for.
	Authenticate func(ctx context.Context, token string) (belay.Actor, error)
	Logger       *slog.Logger
	// SessionTTL is how long a sign-in lasts; DefaultSessionTTL when 0.
	SessionTTL time.Duration
	// Key (KeySize bytes) seals the sign-in cookie. Instances serving one
	// dashboard need the same key. When nil a random one is made: sign-ins
	// then last as long as the process.
	Key []byte
	// SignOuts remembers signed-out sign-ins for every instance; in this
	// process's memory when nil.
	SignOuts SignOuts
	// Now tells the time (time.Now when nil); tests move it.
	Now func() time.Time
	// Heartbeat keeps idle event streams open; 15 s when 0.
	Heartbeat time.Duration
}

// SignOuts records sign-ins signed out before they end, so that a copy of
// their cookie is refused (core.Service keeps them in the database).
type SignOuts interface {
	SignOut(ctx context.Context, id string, until time.Time) error
	SignedOut(ctx context.Context, id string) (bool, error)
}

// memorySignOuts are the SignOuts of one process.
type memorySignOuts struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

func (m *memorySignOuts) SignOut(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, u := range m.ids {
		if !now.Before(u) {
			delete(m.ids, k)
		}
	}
	m.ids[id] = until
	return nil
}

func (m *memorySignOuts) SignedOut(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	return ok, nil
}

// Dashboard is the dashboard's http.Handler.
type Dashboard struct {
	svc       belay.Service
	auth      func(ctx context.Context, token string) (belay.Actor, error)
	log       *slog.Logger
	ttl       time.Duration
	now       func() time.Time
	heartbeat time.Duration
	tmpl      *template.Template
	handler   http.Handler
	aead      cipher.AEAD
	signOuts  SignOuts
}

// webSession is one sign-in, as sealed in its cookie. The token is kept so
// that every request is authenticated again: a revoked token ends its
// sign-ins at once.
type webSession struct {
	// ID names the sign-in for SignOuts.
	ID      string `json:"i"`
	Token   string `json:"t"`
	CSRF    string `json:"c"`
	User    string `json:"u"`
	Expires int64  `json:"e"` // Unix seconds
}

// New returns the dashboard. It fails only when opts.Key is not KeySize
// bytes.
func New(opts Options) (*Dashboard, error) {
	key := opts.Key
	if key == nil {
		key = make([]byte, KeySize)
		_, _ = rand.Read(key)
	}
	if len(key) != KeySize {
		return nil, errors.New("dashboard: the key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{svc: opts.Service, auth: opts.Authenticate, log: opts.Logger, ttl: opts.SessionTTL,
		now: opts.Now, heartbeat: opts.Heartbeat, aead: aead, signOuts: opts.SignOuts}
	if d.signOuts == nil {
		d.signOuts = &memorySignOuts{ids: map[string]time.Time{}}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.ttl == 0 {
		d.ttl = DefaultSessionTTL
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.heartbeat == 0 {
		d.heartbeat = 15 * time.Second
	}
	d.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))

	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(http.FileServerFS(static))))
	mux.HandleFunc("GET /signin", d.signinPage)
	mux.HandleFunc("POST /signin", d.signin)
	mux.Handle("POST /signout", d.authed(d.signout))
	mux.Handle("GET /{$}", d.authed(d.inboxPage))
	mux.Handle("GET /inbox", d.authed(d.inboxFragment))
	mux.Handle("POST /decide/{id}", d.authed(d.decide))
	mux.Handle("GET /events", d.authed(d.events))
	mux.Handle("GET /sessions", d.authed(d.sessionsPage))
	mux.Handle("GET /sessions/{id}", d.authed(d.sessionPage))
	mux.Handle("GET /sessions/{id}/diff", d.authed(d.diffPage))
	mux.Handle("GET /sessions/{id}/rollback", d.authed(d.rollbackPreview))
	mux.Handle("POST /sessions/{id}/rollback", d.authed(d.rollback))
	mux.Handle("GET /sessions/{id}/export", d.authed(d.export))
	mux.Handle("GET /search", d.authed(d.searchPage))
	mux.Handle("GET /feed", d.authed(d.feedPage))
	// Cross-origin POSTs are refused by their Origin / Sec-Fetch-Site headers
	// before the CSRF token is even looked at.
	cop := http.NewCrossOriginProtection()
	d.handler = securityHeaders(cop.Handler(mux))
	return d, nil
}

// Patterns are the paths the dashboard serves, to mount on a server's mux
// beside an API: mounting only these, not "/", leaves the API's own answers
// for unknown paths alone.
func Patterns() []string {
	return []string{"GET /{$}", "/signin", "/signout", "/inbox", "/decide/", "/events", "/sessions", "/sessions/", "/search", "/feed", "/static/"}
}

// ServeHTTP serves the dashboard.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(w, r) }

func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// securityHeaders forbids inline scripts, framing and content sniffing.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// request is what an authenticated handler gets: the caller's context (with
// its identity) and session.
type request struct {
	ctx  context.Context
	sess *webSession
}

type authedFunc func(w http.ResponseWriter, r *http.Request, rq *request)

// authed finds the request's session, authenticates its token again, puts
// the identity on the context and, for POSTs, checks the CSRF token. Without
// a valid session a page goes to sign-in (htmx requests are told to).
func (d *Dashboard) authed(f authedFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess := d.session(r)
		if sess == nil {
			d.toSignin(w, r)
			return
		}
		switch out, err := d.signOuts.SignedOut(r.Context(), sess.ID); {
		case err != nil:
			d.log.Error("dashboard: reading sign-outs", "error", err)
			http.Error(w, "The dashboard cannot check your sign-in right now; try again shortly.", http.StatusServiceUnavailable)
			return
		case out:
			d.toSignin(w, r)
			return
		}
		actor, err := d.auth(r.Context(), sess.Token)
		if err != nil {
			d.toSignin(w, r)
			return
		}
		if r.Method == http.MethodPost {
			got := r.Header.Get(csrfHeader)
			if got == "" {
				got = r.PostFormValue("csrf")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 {
				http.Error(w, "Forbidden: the form is stale or was not sent by this dashboard (CSRF token missing or wrong). Reload the page.", http.StatusForbidden)
				return
			}
		}
		reqlog.NoteUser(r.Context(), actor.UserID)
		f(w, r, &request{ctx: belay.WithActor(r.Context(), actor), sess: sess})
	})
}

// session opens the request's sign-in cookie: nil when there is none, it
// was not sealed with this dashboard's key, or it has ended.
func (d *Dashboard) session(r *http.Request) *webSession {
	var s webSession
	if !d.open(r, CookieName, &s) || s.Token == "" || !d.now().Before(time.Unix(s.Expires, 0)) {
		return nil
	}
	return &s
}

// seal encrypts v as the value of cookie name: the cookie's name is
// authenticated with it, so one cookie's value cannot pass for another's.
func (d *Dashboard) seal(name string, v any) string {
	plain, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the dashboard's own structs and strings are sealed
	}
	nonce := make([]byte, d.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(d.aead.Seal(nonce, nonce, plain, []byte(name)))
}

// open decrypts cookie name of r into v, reporting whether it is there and
// was sealed by this dashboard's key.
func (d *Dashboard) open(r *http.Request, name string, v any) bool {
	c, err := r.Cookie(name)
	if err != nil {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	n := d.aead.NonceSize()
	if err != nil || len(b) < n {
		return false
	}
	plain, err := d.aead.Open(nil, b[:n], b[n:], []byte(name))
	return err == nil && json.Unmarshal(plain, v) == nil
}

func (d *Dashboard) toSignin(w http.ResponseWriter, r *http.Request) {
	clearCookie(w, r)
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("HX-Redirect", "/signin")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path != "/events" {
		http.Redirect(w, r, "/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	if r.Method == http.MethodGet {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// secure reports whether the browser reached the dashboard over HTTPS: the
// request itself is TLS, or a TLS-terminating proxy in front says so
// (X-Forwarded-Proto). Trusting the header is safe here: it only makes the
// cookie of the browser that sent it HTTPS-only.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(CookieName); err == nil {
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	}
}

func (d *Dashboard) signinPage(w http.ResponseWriter, r *http.Request) {
	d.render(w, http.StatusOK, "signin.html", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (d *Dashboard) signin(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	next := safeNext(r.PostFormValue("next"))
	actor, err := d.auth(r.Context(), token)
	if err != nil {
		msg := "That API token is not valid."
		var be *belay.Error
		if errors.As(err, &be) && be.Code != belay.CodeUnauthenticated {
			msg = "Could not sign in: " + be.Message
		}
		d.render(w, http.StatusUnauthorized, "signin.html", map[string]any{"Error": msg, "Next": next})
		return
	}
	expires := d.now().Add(d.ttl)
	s := &webSession{ID: randomID(), Token: token, CSRF: randomID(), User: actor.UserID, Expires: expires.Unix()}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: d.seal(CookieName, s), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r), Expires: expires})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) signout(w http.ResponseWriter, r *http.Request, rq *request) {
	if err := d.signOuts.SignOut(r.Context(), rq.sess.ID, time.Unix(rq.sess.Expires, 0)); err != nil {
		d.fail(w, r, rq, err)
		return
	}
	clearCookie(w, r)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// safeNext keeps a redirect after sign-in on this site: anything but a plain
// path of this site becomes "/". Browsers drop tabs and newlines from a URL
// and read a backslash as a slash, so a path holding any of them, or any
// other control or space character, is refused whole rather than cleaned:
// "/\t/evil.com" would otherwise land on //evil.com.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	return next
}

// page is what every full page's layout needs.
type page struct {
	Title  string
	User   string
	CSRF   string
	Nav    string
	Search string
	Data   any
}

func (d *Dashboard) page(w http.ResponseWriter, rq *request, name, title, nav string, data any) {
	d.render(w, http.StatusOK, name, page{Title: title, User: rq.sess.User, CSRF: rq.sess.CSRF, Nav: nav, Data: data})
}

func (d *Dashboard) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := d.tmpl.ExecuteTemplate(w, name, data); err != nil {
		d.log.Warn("rendering a dashboard page", "template", name, "error", err)
	}
}

// fail shows a service error as a page (or a fragment for htmx).
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, rq *request, err error) {
	status := http.StatusInternalServerError
	msg := "Something went wrong."
	var be *belay.Error
	if errors.As(err, &be) {
		msg = be.Message
		if be.Code == belay.CodeUnauthenticated {
			d.toSignin(w, r)
			return
		}
		status = be.Code.HTTPStatus() // as the API answers it
		if status >= http.StatusInternalServerError {
			d.log.Error("dashboard request failed", "path", r.URL.Path, "error", err)
		}
	} else {
		d.log.Warn("dashboard request failed", "path", r.URL.Path, "error", err)
	}
	if r.Header.Get("HX-Request") != "" {
		// htmx swaps only 2xx answers; the error goes where the result would.
		d.render(w, http.StatusOK, "error-fragment", msg)
		return
	}
	d.render(w, status, "error.html", page{Title: "Error", User: rq.sess.User, CSRF: rq.sess.CSRF, Data: msg})
}
