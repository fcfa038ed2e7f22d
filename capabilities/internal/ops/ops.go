// Package ops is the operations listener of every long-running binary:
// GET /healthz, /readyz and /metrics on the address of --ops-bind (env
// KILN_OPS_BIND) or [server] ops_bind, apart from the routes a workflow
// serves (docs/operations.md). The families that run long (http, the
// trigger families, mcp) import it, so a one-shot binary links no HTTP
// server; importing it registers the "ops" extension, which also attaches
// the process metrics (package metrics) in serve mode, and links the
// CLI's serve loop (cli.EnableServe).
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

// flagBind is --ops-bind; "" falls back to [server] ops_bind, and both
// empty serve no ops listener.
var flagBind string

func init() {
	cli.EnableServe() // every family with listeners that start runs imports this package
	runtime.RegisterExtension(runtime.Extension{
		Name: "ops",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&flagBind, "ops-bind", "", "serve mode: `address` of the ops listener (/healthz, /readyz, /metrics; env KILN_OPS_BIND; default [server] ops_bind, else none)")
		},
		Listeners: func(h *runtime.Host) ([]runtime.Listener, error) {
			metrics.Attach(h) // before any run starts: the serve loop calls Listeners first
			addr := Bind(flagBind, h)
			if addr == "" {
				return nil, nil
			}
			return []runtime.Listener{New(h, addr)}, nil
		},
	})
}

// Bind is the effective ops address: the flag, else [server] ops_bind.
func Bind(flagValue string, h *runtime.Host) string {
	if flagValue != "" {
		return flagValue
	}
	if wf := h.Program.Workflow; wf.Server != nil {
		return wf.Server.OpsBind
	}
	return ""
}

// Listener serves the ops endpoints. It stops last (StopsLast), after
// every other listener drained, so /readyz answers 503 while the process
// drains instead of refusing connections.
type Listener struct {
	host *runtime.Host
	addr string
}

// New returns the ops listener of h on addr.
func New(h *runtime.Host, addr string) *Listener { return &Listener{host: h, addr: addr} }

// Name implements runtime.Listener.
func (l *Listener) Name() string { return "ops" }

// StopsLast tells the serve loop to cancel this listener only once the
// others have returned.
func (l *Listener) StopsLast() {}

// Serve binds the address and answers until ctx is cancelled.
func (l *Listener) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("ops: bind %s: %w", l.addr, err)
	}
	srv := &http.Server{
		Handler:           Handler(l.host),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    8 << 10, // probes and scrapers send a few short headers
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	if a := l.host.Engine.Audit; a != nil {
		a.Info("ops.listening", "addr", addr)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("ops: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx) // a scrape in flight gets its answer; nothing else is pending here
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ops: %w", err)
	}
	return nil
}

// Handler answers GET and HEAD on /healthz, /readyz and /metrics, and 404
// or 405 otherwise. The http family serves the same paths on its own
// address through Health, Ready and the metrics Set.
func Handler(h *runtime.Host) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "method not allowed", "allow": []string{"GET", "HEAD"}})
			return
		}
		switch r.URL.Path {
		case "/healthz":
			writeJSON(w, http.StatusOK, Health(h))
		case "/readyz":
			code, body := Ready(h)
			writeJSON(w, code, body)
		case "/metrics":
			w.Header().Set("Content-Type", ContentType)
			w.WriteHeader(http.StatusOK)
			_ = metrics.Attach(h).Write(w)
		}
	})
}

// ContentType is the Prometheus text exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Health is the /healthz body: the process is up and answering.
func Health(h *runtime.Host) map[string]any {
	return map[string]any{"status": "ok", "workflow": h.Program.Workflow.Name}
}

// Ready is the /readyz answer: 200 when nothing blocks readiness (every
// listener running, MCP servers up, not draining), else 503 with the
// reasons (runtime.Host.BlockReady).
func Ready(h *runtime.Host) (int, map[string]any) {
	if ready, why := h.Ready(); !ready {
		return http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reasons": why}
	}
	return http.StatusOK, map[string]any{"status": "ready"}
}

func writeJSON(w http.ResponseWriter, code int, v map[string]any) {
	body, err := json.Marshal(v)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}
