// Package httpapi serves belay's HTTP API (/v1, JSON), health and metrics.
// It translates between HTTP and the core service and holds no rules.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/reqlog"
)

// DefaultTimeout bounds one request's handling (seed 003's 30 s).
const DefaultTimeout = 30 * time.Second

// Options configure a Server.
type Options struct {
	Service belay.Service
	Logger  *slog.Logger
	// Timeout bounds one request; DefaultTimeout when zero.
	Timeout time.Duration
	// Version is reported by /healthz.
	Version string
	// Authenticate maps a bearer token to an identity; every route but
	// /healthz needs one. Without it every such request is refused.
	Authenticate func(ctx context.Context, token string) (belay.Actor, error)
	// Heartbeat is the interval of keep-alive pings on event streams; 15 s when zero.
	Heartbeat time.Duration
	// BodyGrace is how long a request body may take before MinBodyRate
	// applies (DefaultBodyGrace when zero), and MinBodyRate the bytes a
	// second it must average from then on (DefaultMinBodyRate when zero): a
	// body that arrives slower is REQUEST_TIMEOUT and its connection closed.
	BodyGrace   time.Duration
	MinBodyRate int
}

// The default pace a request body must keep: a connection trickling a byte
// now and then would otherwise be held for as long as its client likes,
// while a large import over a slow link still arrives.
const (
	DefaultBodyGrace   = 10 * time.Second
	DefaultMinBodyRate = 16 << 10
)

// Server is belay's HTTP API. Further handlers (MCP, tRPC, the dashboard)
// mount on the same mux through Handle.
type Server struct {
	svc     belay.Service
	auth    func(ctx context.Context, token string) (belay.Actor, error)
	beat    time.Duration
	log     *slog.Logger
	timeout time.Duration
	grace   time.Duration
	rate    int
	version string
	mux     *http.ServeMux
	reg     *prometheus.Registry
	reqs    *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// New returns a Server with every route registered.
func New(opts Options) *Server {
	s := &Server{svc: opts.Service, auth: opts.Authenticate, beat: opts.Heartbeat, log: opts.Logger,
		timeout: opts.Timeout, grace: opts.BodyGrace, rate: opts.MinBodyRate, version: opts.Version, mux: http.NewServeMux()}
	if s.grace == 0 {
		s.grace = DefaultBodyGrace
	}
	if s.rate == 0 {
		s.rate = DefaultMinBodyRate
	}
	if s.beat == 0 {
		s.beat = 15 * time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	s.reg = prometheus.NewRegistry()
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belay_http_requests_total",
		Help: "HTTP requests by route and status."}, []string{"method", "route", "status"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belay_http_request_duration_seconds",
		Help: "HTTP request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"method", "route"})
	s.reg.MustRegister(s.reqs, s.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.routes()
	return s
}

// Registry returns the Prometheus registry, for other components' metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) routes() {
	s.mux.Handle("GET /healthz", http.HandlerFunc(s.health))
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.stream("GET /metrics", func(w http.ResponseWriter, r *http.Request) error {
		metrics.ServeHTTP(w, r)
		return nil
	})
	s.api("POST /v1/sessions", s.createSession)
	s.api("GET /v1/sessions", s.listSessions, "projectPath", "status", "own", "cursor", "limit")
	s.api("GET /v1/sessions/active", s.activeSession, "projectPath")
	s.api("GET /v1/sessions/{id}", s.getSession)
	s.api("GET /v1/sessions/{id}/checkpoints/{seq}", s.getCheckpointBySeq)
	s.api("POST /v1/checkpoints", s.createCheckpoint)
	s.api("GET /v1/checkpoints", s.listCheckpoints, "sessionId", "projectPath", "type", "hitlRequired", "hitlDecided",
		"createdAfter", "createdBefore", "tags", "cursor", "offset", "limit", "orderBy", "orderDir")
	s.api("GET /v1/checkpoints/{id}", s.getCheckpoint)
	s.api("DELETE /v1/checkpoints/{id}", s.deleteCheckpoint)
	s.api("POST /v1/checkpoints/{id}/decide", s.decide)
	s.stream("GET /v1/checkpoints/{id}/decision", s.waitDecision, "wait")
	s.api("GET /v1/hitl/pending", s.pending, "session")
	s.api("POST /v1/checkpoints/{id}/restore", s.restoreCheckpoint)
	s.api("GET /v1/checkpoints/{id}/diff", s.diffCheckpoint, "to")
	s.api("GET /v1/sessions/{id}/rollbacks", s.listRollbacks)
	s.api("DELETE /v1/sessions/{id}", s.deleteSession)
	s.api("POST /v1/sessions/{id}/export-branch", s.exportBranch)
	// Exports, imports, checks and sizes take as long as the data is big.
	s.stream("GET /v1/sessions/{id}/export", s.exportSession)
	s.stream("POST /v1/sessions/import", s.importSession, "projectPath")
	s.stream("GET /v1/validate", s.validate, "session")
	s.stream("POST /v1/validate", s.validate)
	s.stream("GET /v1/usage", s.diskUsage)
	s.stream("POST /v1/gc", s.collectGarbage)
	s.stream("GET /v1/events", s.sse, streamParams...)
	s.api("POST /v1/sessions/{id}/events", s.appendEvents)
	s.stream("GET /v1/ws", s.websocket, streamParams...)
	s.api("GET /v1/checkpoints/resolve", s.resolveCheckpoint, "ref", "step", "sessionId", "projectPath")
	s.api("GET /v1/sessions/current", s.currentSession, "projectPath")
	s.api("GET /v1/sessions/resolve", s.resolveSession, "ref")
	s.api("PATCH /v1/sessions/{id}", s.updateSession)
	s.api("GET /v1/sessions/{id}/grants", s.listGrants)
	s.api("POST /v1/sessions/{id}/grants", s.grantSession)
	s.api("DELETE /v1/sessions/{id}/grants/{user}", s.revokeGrant)
	s.api("POST /v1/tokens", s.createToken)
	s.api("GET /v1/tokens", s.listTokens)
	s.api("DELETE /v1/tokens/{id}", s.revokeToken)
	s.api("POST /v1/webhooks", s.addWebhook)
	s.api("GET /v1/webhooks", s.listWebhooks)
	s.api("DELETE /v1/webhooks/{id}", s.removeWebhook)
	s.api("GET /v1/webhooks/deliveries", s.listDeliveries, "webhookId", "limit")
	s.api("POST /v1/sessions/{id}/complete", s.endSession(belay.SessionCompleted))
	s.api("POST /v1/sessions/{id}/fail", s.endSession(belay.SessionFailed))
	s.api("POST /v1/sessions/{id}/abandon", s.endSession(belay.SessionAbandoned))
	s.api("POST /v1/sessions/{id}/heartbeat", s.heartbeat)
	s.api("POST /v1/sessions/{id}/resume", s.resumeSession)
	s.api("POST /v1/sessions/resume", s.resumeLatest)
	s.api("POST /v1/sessions/cleanup", s.cleanupSessions)
	s.api("PUT /v1/sessions/{id}/plan", s.setPlan)
	s.api("POST /v1/sessions/{id}/plan/adjust", s.adjustPlan)
	s.api("POST /v1/sessions/{id}/tasks/{task}", s.updateTask)
	s.api("POST /v1/sessions/{id}/cost", s.addCost)
	s.api("GET /v1/sessions/{id}/context", s.taskContext)
	s.api("PUT /v1/retention", s.setRetention)
	s.api("GET /v1/retention", s.listRetention)
	s.api("GET /v1/search", s.search, "q", "projectPath", "tag", "topK", "explain")
	s.api("POST /v1/search/reindex", s.reindex)
	s.api("GET /v1/search/index", s.indexStatus)
}

// apiHandler handles one API call; a returned error becomes the error body.
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// api registers an API route with authentication, its query parameters, the
// request deadline and error handling.
func (s *Server) api(pattern string, h apiHandler, params ...string) {
	s.stream(pattern, func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		return h(w, r.WithContext(ctx))
	}, params...)
}

// stream registers a route with authentication, its query parameters and
// error handling but no deadline: long polls and event streams bound their
// own time. params are the query parameters the route reads: a query string
// that does not parse, or holds any other parameter, is refused before h
// runs, so no route acts on a request it half understood.
func (s *Server) stream(pattern string, h apiHandler, params ...string) {
	s.authenticated(pattern, func(w http.ResponseWriter, r *http.Request) error {
		if err := checkQuery(r.URL.RawQuery, params); err != nil {
			return err
		}
		return h(w, r)
	})
}

// authenticated registers a route with authentication and error handling.
func (s *Server) authenticated(pattern string, h apiHandler) {
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		reqlog.NoteUser(r.Context(), a.UserID)
		r = r.WithContext(belay.WithActor(r.Context(), a))
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// authenticate hands the request's bearer token ("" when none) to the
// server's Authenticate, which decides.
func (s *Server) authenticate(r *http.Request) (belay.Actor, error) {
	if s.auth == nil {
		return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "this server accepts no tokens")
	}
	token := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return belay.Actor{}, belay.Errorf(belay.CodeUnauthenticated, "a valid API token is required: send Authorization: Bearer belay_…")
		}
		token = strings.TrimSpace(t)
	}
	return s.auth(r.Context(), token)
}

// Handle mounts another handler on the server's mux behind the same
// authentication as the API: h finds the caller with belay.ActorFrom, and
// reads its query string itself.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.authenticated(pattern, func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	})
}

// HandlePublic mounts a handler that needs no token (e.g. static assets).
func (s *Server) HandlePublic(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler returns the root handler: the request body's pace, panic
// recovery, metrics, then routes.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		if r.Body != nil && r.Body != http.NoBody {
			rec.body = &pacedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: start, grace: s.grace, rate: int64(s.rate)}
			r.Body = rec.body
			defer rec.body.answered()
		}
		ctx, user := reqlog.WithSlot(r.Context())
		r = r.WithContext(ctx)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "path", r.URL.Path, "panic", p)
				if !rec.wrote {
					s.writeError(rec, r, belay.Errorf(belay.CodeInternal, "internal error"))
				}
			}
			_, route := s.mux.Handler(r)
			if route == "" {
				route = "/" // no route: one label for all of them
			}
			took := time.Since(start)
			s.reqs.WithLabelValues(r.Method, route, strconv.Itoa(rec.status)).Inc()
			s.latency.WithLabelValues(r.Method, route).Observe(took.Seconds())
			// Health checks and scrapes come every few seconds: debug only.
			level := slog.LevelInfo
			if route == "GET /healthz" || route == "GET /metrics" {
				level = slog.LevelDebug
			}
			// A path is at most a line of the log (a tRPC batch names every call).
			s.log.LogAttrs(r.Context(), level, "request", slog.String("method", r.Method), slog.String("path", belay.Clip(r.URL.Path, maxLoggedPath)),
				slog.Int("status", rec.status), slog.Duration("duration", took), slog.String("user", user()))
		}()
		if _, pattern := s.mux.Handler(r); pattern == "" {
			s.noRoute(rec, r)
			return
		}
		s.mux.ServeHTTP(rec, r)
	})
}

// noRoute answers a request no route takes: 405 with Allow when the path
// exists for other methods, else 404, both with the JSON error body.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		other := r.Clone(r.Context())
		other.Method = m
		if _, pattern := s.mux.Handler(other); pattern != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		s.writeError(w, r, belay.Errorf(belay.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	s.writeError(w, r, belay.Errorf(belay.CodeMethodNotAllowed, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")).
		With("allow", allowed))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.svc.Health(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "error": s.publicError(r, err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.version})
}

// maxLoggedPath is how many characters of a request's path the log keeps.
const maxLoggedPath = 500

// statusRecorder remembers the status for metrics and the log and passes Flush through
// for streaming responses.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	// body is the request's body, nil when it has none.
	body *pacedBody
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.answering()
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.answering()
		r.wrote = true
	}
	return r.ResponseWriter.Write(b)
}

// answering bounds, by the body's pace, what net/http reads of a body the
// handler left unread before it answers (a refused token, no route).
func (r *statusRecorder) answering() {
	if r.body != nil {
		r.body.answered()
	}
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
