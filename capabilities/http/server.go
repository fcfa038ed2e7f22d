// Package http is kiln's HTTP serve mode (family kiln_http): it serves a
// workflow's [[http_routes]] as webhook endpoints with per-route auth,
// rate limits, body parsing, input schemas and idempotency, plus
// /healthz, /readyz and /metrics (docs/serve.md). Further auth kinds
// (oidc) register through RegisterAuthKind.
package http

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	httpspec "github.com/kilnworks/kiln/capabilities/http/spec"
	"github.com/kilnworks/kiln/capabilities/internal/ops"
	familyspec "github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Limits of serve mode (docs/serve.md).
const (
	MaxBodyBytes   = 1 << 20  // larger bodies get 413
	MaxHeaderBytes = 16 << 10 // larger request heads get 431
)

// Config tunes a Server; zero fields take the defaults.
type Config struct {
	Addr         string        // default 127.0.0.1:8080
	DrainTimeout time.Duration // default 30s
	// RunTimeout bounds each run a request starts; 0 = the workflow's
	// [budget].max_run_time_secs (or none).
	RunTimeout        time.Duration
	ReadHeaderTimeout time.Duration // default 10s: cuts slowloris clients
	ReadTimeout       time.Duration // default 30s: whole request incl. body
	WriteTimeout      time.Duration // default 30s, counted from the end of the run
	IdleTimeout       time.Duration // default 120s between keep-alive requests
	// MaxAsyncRuns bounds the runs async routes have accepted and not yet
	// ended; beyond it they answer 503 (default 256).
	MaxAsyncRuns int
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	def(&c.DrainTimeout, 30*time.Second)
	def(&c.ReadHeaderTimeout, 10*time.Second)
	def(&c.ReadTimeout, 30*time.Second)
	def(&c.WriteTimeout, 30*time.Second)
	def(&c.IdleTimeout, 120*time.Second)
	if c.MaxAsyncRuns <= 0 {
		c.MaxAsyncRuns = 256
	}
}

// isBuiltin reports whether path is answered before routing.
func isBuiltin(path string) bool { return httpspec.IsReservedPath(path) }

type route struct {
	spec     workflow.HTTPRoute
	name     string // "POST /hook", the metrics label and log field
	authRef  string // "kind:binding", "" = open
	authKind string
	limiter  *bucket
	schema   runtime.SchemaValidator
	ttl      time.Duration
	params   []string      // the path's wildcard names, in order
	async    bool          // reply = "async"
	keep     time.Duration // async: how long its run records are kept
}

// Server serves one host's [[http_routes]]. It implements
// runtime.Listener.
type Server struct {
	host    *runtime.Host
	cfg     Config
	audit   *slog.Logger
	now     func() time.Time
	routes  []*route       // as declared
	mux     *http.ServeMux // route patterns (path parameters), then notFound
	methods []string       // every declared method, sorted (405's Allow)
	metrics *routeMetrics
	idem    *idemStore // nil: no keyed route
	tls     tlsServer  // nil: plain HTTP

	// Async routes (async.go): runs holds their records, asyncSlots
	// bounds the runs in flight and asyncRuns counts them for the drain.
	runs       runtime.RunStore // nil: no async route
	asyncSlots chan struct{}
	asyncRuns  sync.WaitGroup

	verifiers atomic.Pointer[map[string]Verifier] // by authRef; swapped on SIGHUP

	// runCtx outlives requests: a client hanging up does not abort a
	// run; only an expired drain cancels it.
	runCtx     context.Context
	cancelRuns context.CancelFunc
}

// New validates the host's routes and builds the server. Every
// misconfiguration (unknown auth kind or binding, missing secret,
// keyed route without a state dir, bad schema, bad rate limit, bad TLS
// material) is an error here: the server refuses to start rather than
// serve a route open or half-configured.
func New(h *runtime.Host, cfg Config) (*Server, error) {
	cfg.defaults()
	wf := h.Program.Workflow
	s := &Server{host: h, cfg: cfg, audit: h.Engine.Audit, now: hostNow(h), mux: http.NewServeMux()}
	if s.audit == nil {
		s.audit = slog.New(slog.DiscardHandler)
	}
	s.audit = s.audit.With("workflow", wf.Name)
	var names []string
	seen := map[string]bool{}
	for i, spec := range wf.HTTPRoutes {
		rt, err := s.newRoute(spec)
		if err != nil {
			return nil, fmt.Errorf("http_routes[%d] %s %s: %w", i, spec.Method, spec.Path, err)
		}
		if seen[rt.name] {
			return nil, fmt.Errorf("http_routes[%d] %s %s: declared twice", i, spec.Method, spec.Path)
		}
		seen[rt.name] = true
		s.routes = append(s.routes, rt)
		names = append(names, rt.name)
	}
	// Conflicting patterns make ServeMux panic: refuse them first, as
	// kiln check does.
	for _, c := range httpspec.RouteConflicts(wf.HTTPRoutes) {
		a, b := wf.HTTPRoutes[c.First], wf.HTTPRoutes[c.Second]
		return nil, fmt.Errorf("http_routes[%d] %s %s and http_routes[%d] %s %s conflict: %s",
			c.First, a.Method, a.Path, c.Second, b.Method, b.Path, c.Detail)
	}
	methods := map[string]bool{}
	for _, rt := range s.routes {
		s.mux.Handle(httpspec.RoutePattern(rt.spec.Method, rt.spec.Path), s.routeHandler(rt))
		methods[rt.spec.Method] = true
	}
	s.mux.HandleFunc("/", s.noRoute) // the least specific pattern: what no route matched
	s.methods = runtime.SortedKeys(methods)
	s.asyncSlots = make(chan struct{}, cfg.MaxAsyncRuns)
	s.metrics = newMetrics(h, names) // runs, nodes, triggers: every run of the process
	for _, spec := range wf.HTTPRoutes {
		if spec.IdempotencyKey != "" {
			s.metrics.keyed(spec.Method + " " + spec.Path)
		}
	}
	if err := s.loadVerifiers(); err != nil {
		return nil, err
	}
	tlsSrv, err := newTLSServer(wf)
	if err != nil {
		return nil, err
	}
	s.tls = tlsSrv
	s.runCtx, s.cancelRuns = context.WithCancel(context.Background())
	return s, nil
}

func (s *Server) newRoute(spec workflow.HTTPRoute) (*route, error) {
	h := s.host
	if !validMethod(spec.Method) {
		return nil, fmt.Errorf("method %q is not an upper-case HTTP method token", spec.Method)
	}
	if !strings.HasPrefix(spec.Path, "/") {
		return nil, errors.New(`path must start with "/"`)
	}
	if isBuiltin(spec.Path) {
		return nil, fmt.Errorf("path %s is reserved for the built-in endpoint", spec.Path)
	}
	if err := familyspec.Err(httpspec.CheckRoutePath(spec.Method, spec.Path)); err != nil {
		return nil, err
	}
	if err := familyspec.Err(httpspec.CheckRouteReply(spec)); err != nil {
		return nil, err
	}
	if bad := httpspec.CheckRouteHeaders(spec.Headers); len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	if _, err := h.Program.Entry(spec.StartNode); err != nil {
		return nil, fmt.Errorf("start_node %q: %v", spec.StartNode, err)
	}
	rt := &route{spec: spec, name: spec.Method + " " + spec.Path, params: httpspec.WildcardNames(spec.Path)}
	if spec.Reply == httpspec.ReplyAsync {
		if asyncServing == nil {
			return nil, errNoAsync
		}
		if err := asyncServing.route(s, rt); err != nil {
			return nil, err
		}
	}
	if rl := spec.RateLimit; rl != nil {
		if rl.Capacity < 1 || rl.PerSecond <= 0 {
			return nil, errors.New("rate_limit needs capacity >= 1 and per_second > 0")
		}
		rt.limiter = newBucket(rl.Capacity, rl.PerSecond, s.now)
	}
	kind, binding := parseAuthRef(spec.Auth)
	if kind != "" {
		if _, ok := lookupAuthKind(kind); !ok {
			compiled := strings.Join(registeredAuthKinds(), ", ")
			if compiled == "" {
				compiled = "none"
			}
			return nil, fmt.Errorf("auth kind %q is not compiled into this binary (compiled in: %s; a generated program registers those its routes use: build it again with kiln build or go generate); refusing to serve the route open",
				kind, compiled)
		}
		rt.authKind, rt.authRef = kind, kind+":"+binding
	}
	if spec.InputSchema != "" {
		sch, err := compileSchema(spec.InputSchema, h.Program.Workflow.Assets)
		if err != nil {
			return nil, err
		}
		rt.schema = sch
	}
	if spec.IdempotencyKey != "" {
		if idempotency == nil {
			return nil, errNoIdempotency
		}
		store := idempotency.store(h.Engine)
		if store == nil {
			return nil, errors.New("idempotency_key needs a state directory (--state-dir)")
		}
		rt.ttl = 86400 * time.Second
		if t := spec.IdempotencyTTLSecs; t != nil {
			if *t <= 0 {
				return nil, errors.New("idempotency_ttl_secs must be positive")
			}
			rt.ttl = time.Duration(*t) * time.Second
		}
		if s.idem == nil {
			s.idem = &idemStore{store: store}
		}
	}
	return rt, nil
}

func (s *Server) runTimeout() time.Duration {
	if s.cfg.RunTimeout > 0 {
		return s.cfg.RunTimeout
	}
	if b := s.host.Program.Workflow.Budget; b != nil && b.MaxRunTimeSecs > 0 {
		return time.Duration(b.MaxRunTimeSecs) * time.Second
	}
	return 0
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// loadVerifiers (re)builds every route's verifier, resolving secrets
// afresh. On error nothing is swapped.
func (s *Server) loadVerifiers() error {
	next := map[string]Verifier{}
	for _, rt := range s.routes {
		if rt.authRef == "" || next[rt.authRef] != nil {
			continue
		}
		k, _ := lookupAuthKind(rt.authKind)
		_, binding := parseAuthRef(rt.authRef)
		v, err := k.New(s.host, binding)
		if err != nil {
			return fmt.Errorf("http route %s: auth %s: %w", rt.name, rt.authRef, err)
		}
		next[rt.authRef] = v
	}
	s.verifiers.Store(&next)
	return nil
}

// Reload re-reads TLS material and auth secrets (SIGHUP). Open
// connections are untouched; on any error the old material stays.
func (s *Server) Reload() error {
	if s.tls != nil {
		if err := s.tls.load(); err != nil {
			s.audit.Error("http.reload_failed", "error", err.Error())
			return err
		}
	}
	if err := s.loadVerifiers(); err != nil {
		s.audit.Error("http.reload_failed", "error", err.Error())
		return err
	}
	s.audit.Info("http.reloaded")
	return nil
}

// Name implements runtime.Listener.
func (s *Server) Name() string { return "http" }

// Serve binds cfg.Addr and serves until ctx is cancelled, then drains.
func (s *Server) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("http: bind %s: %w", s.cfg.Addr, err)
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener serves on ln until ctx is cancelled. Then it stops
// accepting, lets in-flight runs finish for up to the drain timeout,
// cancels whatever is still running, and returns nil.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	if s.idem != nil {
		s.idem.sweep()
	}
	sweep := s.sweepRuns() // async.go
	defer sweep.Stop()
	if s.runs != nil { // async routes
		asyncServing.resume(s, context.Background())
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		// The net/http hard cap (plus its 4 KiB slop) sits above the
		// 16 KiB limit ServeHTTP enforces with a JSON 431.
		MaxHeaderBytes: 4 * MaxHeaderBytes,
		ErrorLog:       log.New(serverLog{s.audit}, "", 0),
		TLSNextProto:   map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1 only
	}
	if s.tls != nil {
		ln = s.tls.listener(ln)
	}
	addr := ln.Addr().String()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.audit.Info("http.listening", "addr", addr, "tls", s.tls != nil, "routes", len(s.metrics.latency))
	for {
		select {
		case <-hup:
			_ = s.Reload()
		case <-sweep.C:
			s.runs.SweepRuns(context.Background())
		case err := <-errc:
			s.cancelRuns()
			return fmt.Errorf("http: %w", err)
		case <-ctx.Done():
			return s.drain(srv, errc)
		}
	}
}

func (s *Server) drain(srv *http.Server, errc chan error) error {
	s.audit.Info("http.draining", "timeout_ms", s.cfg.DrainTimeout.Milliseconds())
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	err := srv.Shutdown(dctx)
	// No handler is left to accept an async run: wait for those accepted
	// (async.go) within what remains of the drain.
	asyncDone := s.asyncDrained()
	if err == nil {
		select {
		case <-asyncDone:
		case <-dctx.Done():
			err = dctx.Err()
		}
	}
	if err != nil {
		// Out of time: stop the remaining runs and give their handlers a
		// moment (within the CLI's grace) to answer and release
		// idempotency claims. Shutdown again returns once every
		// connection is idle, which net/http marks only after the
		// handler returned and its reply was written.
		s.audit.Warn("http.drain_timeout", "error", err.Error())
		s.cancelRuns()
		grace, cancelGrace := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(grace)
		_ = srv.Close()
		// Cut runs end at once and record how they ended.
		select {
		case <-asyncDone:
		case <-grace.Done():
			s.audit.Error("http.async_runs_not_recorded", "detail", "async runs still running after the drain's grace")
		}
		cancelGrace()
	}
	<-errc
	s.cancelRuns()
	s.audit.Info("http.stopped")
	return nil
}

// serverLog turns net/http's error log (TLS handshake failures, hijack
// errors) into audit events.
type serverLog struct{ audit *slog.Logger }

func (l serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		l.audit.Warn("tls.handshake_failed", "detail", msg)
	} else {
		l.audit.Warn("http.server_error", "detail", msg)
	}
	return len(p), nil
}

// ServeHTTP answers one request in the order docs/serve.md lists.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if headSize(r) > MaxHeaderBytes {
		writeJSON(w, http.StatusRequestHeaderFieldsTooLarge, map[string]any{"error": "request header fields too large",
			"limit_bytes": MaxHeaderBytes})
		return
	}
	if isBuiltin(r.URL.Path) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			s.builtin(w, r) // HEAD: net/http drops the body (load balancer probes)
			return
		}
		// A known path: wrong method, not "not found".
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "method not allowed", "allow": []string{"GET", "HEAD"}})
		return
	}
	if !cleanPath(r.URL.EscapedPath()) {
		// ServeMux would redirect it; no route has such a path.
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
		return
	}
	s.mux.ServeHTTP(w, r) // a route's handler (routeHandler), else noRoute
}

// routeHandler serves the route rt matched by the mux, which has set the
// request's path values.
func (s *Server) routeHandler(rt *route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != rt.spec.Method { // ServeMux lets a GET pattern match HEAD
			s.noRoute(w, r)
			return
		}
		start := time.Now()
		code := s.serveRoute(w, r, rt, start)
		s.metrics.observeRequest(rt.name, code, time.Since(start))
	}
}

// noRoute answers a request no route matched: 405 with the methods whose
// routes match its path, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	probe := *r
	for _, m := range s.methods {
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); strings.HasPrefix(pattern, m+" ") {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "method not allowed", "allow": allow})
}

// cleanPath reports whether p (escaped) is in the canonical form
// ServeMux serves without a redirect: no empty, "." or ".." segments.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// noParams is trigger.path of a route without wildcards (shared: run
// values are never changed in place).
var noParams = map[string]any{}

// pathParams is trigger.path: each wildcard's value, unescaped.
func pathParams(r *http.Request, rt *route) map[string]any {
	if len(rt.params) == 0 {
		return noParams
	}
	out := make(map[string]any, len(rt.params))
	for _, name := range rt.params {
		out[name] = r.PathValue(name)
	}
	return out
}

// headSize approximates the bytes of the request line and headers.
func headSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len(r.Host) + 8
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

func (s *Server) builtin(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case httpspec.HealthPath:
		writeJSON(w, http.StatusOK, ops.Health(s.host))
	case httpspec.ReadyPath:
		code, body := ops.Ready(s.host)
		writeJSON(w, code, body)
	case wellKnownPath, openWOPPath, agentsPath:
		s.serveDiscovery(w, r)
	default: // under /v1/agents/ or /v1/runs (isBuiltin)
		if r.URL.Path == httpspec.RunsPath || strings.HasPrefix(r.URL.Path, httpspec.RunsPath+"/") {
			if s.runs == nil { // no async route
				writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
				return
			}
			asyncServing.runStatus(s, w, r) // async.go
			return
		}
		s.serveAgent(w, r)
	case httpspec.MetricsPath:
		w.Header().Set("Content-Type", ops.ContentType)
		w.WriteHeader(http.StatusOK)
		_ = s.metrics.write(w, s.host.Program.Workflow.Name)
	}
}

// serveRoute answers a request on a declared route and returns the status
// code it answered with (for metrics).
func (s *Server) serveRoute(w http.ResponseWriter, r *http.Request, rt *route, start time.Time) int {
	// Every reply of the route echoes the request id (request.go).
	id, fresh := requestID(r)
	w.Header()[RequestIDHeader] = []string{id}
	a, code := s.admit(w, r, rt, id)
	if code != 0 {
		return code // refused, invalid or replayed: already answered
	}
	if rt.async {
		return asyncServing.accept(s, w, r, rt, a) // async.go
	}
	if fresh {
		a.runID = id // a generated request id names the sync run too
	}
	return s.runRoute(w, r, rt, a, start)
}

// routeLog is the logger of a route's audit events, built when one is
// logged: most requests log none.
func (s *Server) routeLog(r *http.Request, rt *route) *slog.Logger {
	return s.audit.With("route", rt.name, "remote", r.RemoteAddr)
}

// anonymous is the principal of a route without auth. Every such run
// shares it: run values are never changed in place.
var anonymous = map[string]any{"kind": "anonymous", "name": "anonymous"}

// admitted is a request let through to a run.
type admitted struct {
	trigger map[string]any
	key     string // the idempotency key claimed ("" = none)
	tp      string // the caller's traceparent header
	runID   string // a sync run's execution id ("" = a new one)
}

// admit takes a request through the route's checks in the order of
// docs/serve.md (rate limit, body, auth, parsing, input schema,
// idempotency) and builds the run's trigger. A request it answers itself
// comes back with that reply's status code (never 0: net/http refuses
// codes under 100); an admitted one with 0. It returns before the run
// starts, so its large stack frame is not under the run's (a request's
// stack that stays small is not grown and shrunk again around every GC).
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rt *route, requestID string) (admitted, int) {
	log := func() *slog.Logger { return s.routeLog(r, rt) }
	if rt.limiter != nil {
		if ok, wait := rt.limiter.take(); !ok {
			ms := wait.Milliseconds() + 1
			w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
			log().Warn("http.rate_limited", "retry_after_ms", ms)
			return admitted{}, writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "rate limited", "retry_after_ms": ms})
		}
	}
	if rt.authRef != "" {
		if err := singleCredential(r.Header); err != nil {
			log().Warn("http.auth_denied", "auth", rt.authRef, "detail", err.Error())
			return admitted{}, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad request", "detail": err.Error()})
		}
	}
	if r.ContentLength > MaxBodyBytes {
		return admitted{}, writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "request body too large", "limit_bytes": MaxBodyBytes})
	}
	body, err := readBody(r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return admitted{}, writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "request body too large", "limit_bytes": MaxBodyBytes})
		}
		return admitted{}, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad request", "detail": "cannot read body: " + err.Error()})
	}

	principal := anonymous
	if rt.authRef != "" {
		v := (*s.verifiers.Load())[rt.authRef]
		name, err := v.Verify(r, body)
		if err != nil {
			log().Warn("http.auth_denied", "auth", rt.authRef, "detail", err.Error())
			return admitted{}, writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized", "detail": err.Error()})
		}
		principal = map[string]any{"kind": rt.authKind, "name": name}
	}

	payload, dropped, err := parseBody(r.Header.Get("Content-Type"), body)
	if err != nil {
		return admitted{}, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad request", "detail": err.Error()})
	}
	for _, field := range dropped {
		log().Info("http.multipart_file_dropped", "field", field)
	}
	if rt.schema != nil {
		if errs := schemaErrors(rt.schema, payload); errs != nil {
			return admitted{}, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "input does not match input_schema", "details": errs})
		}
	}

	var trigger map[string]any
	if obj, ok := payload.(map[string]any); ok {
		// Decoded for this request alone: hoist its fields in place (what
		// MakeTrigger does with a copy), kind last so it cannot be spoofed.
		trigger = obj
		trigger["kind"] = "http"
	} else {
		trigger = runtime.MakeTrigger("http", payload)
	}
	trigger["principal"] = principal
	// The request contract (docs/serve.md), set after the body's fields so
	// a body cannot spoof them.
	query, err := queryOf(r)
	if err != nil {
		return admitted{}, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad request", "detail": "query string: " + err.Error()})
	}
	trigger["query"] = query
	trigger["path"] = pathParams(r, rt)
	trigger["headers"] = headersOf(r, rt.spec.Headers)
	trigger["request_id"] = requestID
	tp := r.Header.Get("Traceparent")
	if runtime.ValidTraceparent(tp) {
		trigger["traceparent"] = tp
	}

	var key string
	if rt.spec.IdempotencyKey != "" {
		key, err = idempotency.key(rt.spec.IdempotencyKey, trigger, body)
		if err != nil {
			return admitted{}, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad request", "detail": err.Error()})
		}
		claim, entry, takenOver, err := s.idem.begin(rt.name, key)
		switch {
		case err != nil:
			log().Error("http.idempotency_error", "error", err.Error())
			// Unavailable, not failed: the delivery is retryable (a shared
			// store's database away), and nothing ran.
			return admitted{}, writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "idempotency store unavailable"})
		case claim == claimInFlight:
			s.metrics.observeIdempotency(rt.name, false)
			return admitted{}, writeJSON(w, http.StatusConflict, map[string]any{"error": "a request with this idempotency key is in flight"})
		case claim == claimReplay:
			s.metrics.observeIdempotency(rt.name, true)
			w.Header().Set("X-Idempotent-Replay", "true")
			if rt.async {
				asyncServing.location(w, entry.Body) // async.go: the accepted run's status URL
			}
			return admitted{}, write(w, entry.Status, entry.ContentType, entry.Body)
		case takenOver:
			log().Warn("http.idempotency_takeover", "detail", "in-flight marker of a run whose process is gone")
		}
	}
	return admitted{trigger: trigger, key: key, tp: tp}, 0
}

// runRoute runs the route's workflow for an admitted request and replies.
func (s *Server) runRoute(w http.ResponseWriter, r *http.Request, rt *route, a admitted, start time.Time) int {
	key := a.key
	if key != "" {
		// Should the request end before the claim is settled (a panic),
		// the claim must not outlive it.
		defer func() {
			if key != "" {
				_ = s.idem.abandon(rt.name, key)
			}
		}()
	}
	rep := s.host.Fire(runtime.WithTraceparent(s.runCtx, a.tp), runtime.RunOptions{
		Start: rt.spec.StartNode, Trigger: a.trigger, Timeout: s.runTimeout(), ExecutionID: a.runID})
	code, ctype, out := reply(rep.Outcome)
	out = runtime.RedactBody(ctype, out) // before it is stored for replays too
	if s.runCtx.Err() != nil && rep.Outcome.Status == runtime.StatusErrored {
		code = http.StatusServiceUnavailable // cut short by an expired drain
	}

	// Settle the claim before replying, so a redelivery that follows the
	// reply sees the outcome: completed and paused replies are recorded,
	// anything else is forgotten (failures stay retryable).
	if key != "" {
		st := rep.Outcome.Status
		var err error
		if st == runtime.StatusCompleted || st == runtime.StatusPaused {
			err = s.idem.finish(rt.name, key, rt.ttl, code, ctype, out)
		} else {
			err = s.idem.abandon(rt.name, key)
		}
		if err != nil {
			s.routeLog(r, rt).Error("http.idempotency_error", "error", err.Error())
		}
		key = ""
	}
	// The write deadline (set by net/http once the request head was read)
	// ran while the workflow did: restart it, unless the request so far
	// took under 1% of it (most do, and the reply keeps 99% of its time).
	if now := time.Now(); now.Sub(start) >= s.cfg.WriteTimeout/100 {
		_ = http.NewResponseController(w).SetWriteDeadline(now.Add(s.cfg.WriteTimeout))
	}
	// net/http sends the reply once the handler returns; an expired drain
	// waits for that (see drain), so no flush here (flushing inside the
	// handler lowered make bench's ratio in A/B runs).
	return write(w, code, ctype, out)
}

// readBody reads at most MaxBodyBytes. A declared length (already checked
// against the limit) sizes the buffer once, and net/http stops the body
// there; a body of unknown length is cut at the limit.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	// No ResponseWriter: a body over the limit is answered with a 413,
	// without net/http's Connection: close.
	return io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
}

// reply maps an outcome to the HTTP answer: the respond node's reply for
// a completed run, else the outcome JSON with its status code.
func reply(o *runtime.Outcome) (int, string, []byte) {
	code := http.StatusInternalServerError
	switch o.Status {
	case runtime.StatusCompleted:
		if hr := o.HTTPResponse; hr != nil {
			if hr.Status < 200 {
				return http.StatusInternalServerError, "application/json",
					[]byte(fmt.Sprintf(`{"error":"respond status %d is not a final HTTP status"}`, hr.Status))
			}
			return hr.Status, hr.ContentType, []byte(hr.Body)
		}
		code = http.StatusOK
	case runtime.StatusPaused:
		code = http.StatusAccepted
	case runtime.StatusFailed:
		code = http.StatusUnprocessableEntity
	case runtime.StatusTimedOut:
		code = http.StatusGatewayTimeout
	case runtime.StatusErrored:
		if o.Err != nil && o.Err.Class == runtime.ClassPolicy {
			code = http.StatusForbidden
		}
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return http.StatusInternalServerError, "application/json", []byte(`{"error":"cannot encode outcome"}`)
	}
	return code, "application/json", body
}

func writeJSON(w http.ResponseWriter, code int, v map[string]any) int {
	body, err := runtime.EncodeJSON(v)
	if err != nil {
		body = []byte(`{"error":"internal error"}`)
		code = http.StatusInternalServerError
	}
	return write(w, code, "application/json", body)
}

// autoLengthMax: net/http gives a reply body shorter than this (its
// buffer before chunking) a Content-Length of its own when the handler
// returns; a longer one needs it set, or it goes out chunked.
const autoLengthMax = 2048

// Header values shared by every reply (net/http copies the header map
// when it writes the header, and nothing here changes them in place).
var (
	nosniff  = []string{"nosniff"}
	jsonType = []string{"application/json"}
)

// write sends a reply and returns its status code. Every body passes the
// secret redactor (JSON bodies stay valid JSON): no registered secret
// value leaves the process, whatever a node put in it, and a stored reply
// replayed after a secret was registered is redacted too.
func write(w http.ResponseWriter, code int, contentType string, body []byte) int {
	body = runtime.RedactBody(contentType, body)
	if code == http.StatusNoContent || code == http.StatusNotModified {
		body = nil // these statuses carry no body
	}
	// Canonical keys assigned directly: Header.Set would re-canonicalize
	// them on every reply.
	h := w.Header()
	if contentType == "application/json" {
		h["Content-Type"] = jsonType
	} else {
		h["Content-Type"] = []string{contentType}
	}
	if len(body) >= autoLengthMax {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	} // else net/http sets it from the body, without the two allocations
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(code)
	_, _ = w.Write(body)
	return code
}
