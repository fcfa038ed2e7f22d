package otel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	_ "github.com/kilnworks/kiln/capabilities/compose"
	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/capabilities/otel/otlptest"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var protocols = []string{ProtocolGRPC, ProtocolHTTPProtobuf, ProtocolHTTPJSON}

// collector starts an in-process receiver for protocol and returns it with
// the endpoint to configure.
func collector(t *testing.T, protocol string) (*otlptest.Receiver, string) {
	t.Helper()
	if protocol == ProtocolGRPC {
		rec, addr := otlptest.NewGRPC(t, nil)
		return rec, "http://" + addr
	}
	return otlptest.NewHTTP(t, nil)
}

// target is the loopback server http_request nodes call: it records the
// traceparent header of each request and answers with a marker body (a
// node output, which must never reach a span).
type target struct {
	*httptest.Server
	mu          sync.Mutex
	traceparent []string
}

const outputMarker = "node-output-marker-8c1f"

func newTarget(t *testing.T) *target {
	tg := &target{}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.traceparent = append(tg.traceparent, r.Header.Get("Traceparent"))
		tg.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, outputMarker)
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) seen() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]string(nil), tg.traceparent...)
}

func decode(t *testing.T, src string) *workflow.Workflow {
	t.Helper()
	var wf workflow.Workflow
	md, err := toml.Decode(src, &wf)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("undecoded keys %v", und)
	}
	return &wf
}

// fetchWorkflow calls tg, branches on the answer and terminates.
func fetchWorkflow(t *testing.T, tg *target, otelBlock string) *workflow.Workflow {
	return decode(t, fmt.Sprintf(`
name = "traced"

[[nodes]]
id = "fetch"
type = "http_request"
method = "GET"
url_from = "trigger.url"

[[nodes]]
id = "ok"
type = "condition"
expr = "fetch.status"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "fetch"
to = "ok"

[[edges]]
from = "ok"
to = "done"
when = "true"

[policy.http]
urls = [%q]

%s
`, tg.URL+"/**", otelBlock))
}

func otelBlock(endpoint, protocol, extra string) string {
	return fmt.Sprintf("[logging.otel]\nendpoint = %q\nprotocol = %q\n%s\n", endpoint, protocol, extra)
}

type cliResult struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// runCLI runs wf once through the CLI every sealed binary uses, with
// payload as --input: Setup, the run, and the extensions' Close.
func runCLI(t *testing.T, wf *workflow.Workflow, payload map[string]any, args ...string) cliResult {
	t.Helper()
	in := filepath.Join(t.TempDir(), "input.json")
	data, _ := json.Marshal(payload)
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := cli.Main(append([]string{"--input", in, "--log-format", "json", "--mode", "once"}, args...),
		cli.Options{Prog: "otel-test", Workflow: wf, Stdout: &stdout, Stderr: &stderr, Env: func(string) string { return "" }})
	return cliResult{code, stdout.String(), stderr.String(), time.Since(start)}
}

func byName(spans []otlptest.Span) map[string]otlptest.Span {
	out := map[string]otlptest.Span{}
	for _, s := range spans {
		out[s.Name] = s
	}
	return out
}

func wantAttrs(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: attribute %s = %q, want %q (all: %v)", what, k, got[k], v, got)
		}
	}
}

// noLeak fails when any exported request carries one of the markers.
func noLeak(t *testing.T, rec *otlptest.Receiver, markers ...string) {
	t.Helper()
	for _, req := range rec.Requests() {
		var blob bytes.Buffer
		blob.Write(req.Body)
		fmt.Fprintf(&blob, "%+v", req.Spans)
		for _, m := range markers {
			if bytes.Contains(blob.Bytes(), []byte(m)) {
				t.Errorf("%s export carries %q", req.Protocol, m)
			}
		}
	}
}

// TestExportThroughCLI runs a workflow once through the CLI for each
// protocol: the spans are exported by the time Main returns (Close
// flushed them), carry the documented names, attributes and resource,
// nest node spans under the run span, and the http_request node forwards
// its own span as the traceparent.
func TestExportThroughCLI(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20otlp-token-5e2a,x-tenant=team-a")
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			rec, endpoint := collector(t, protocol)
			wantPath := TracesPath
			if protocol == ProtocolHTTPJSON {
				endpoint += "/custom/otlp" // a path is used as given
				wantPath = "/custom/otlp"
			}
			tg := newTarget(t)
			wf := fetchWorkflow(t, tg, otelBlock(endpoint, protocol,
				`service_name = "billing"`+"\n"+`resource_attrs = { "deployment.environment" = "test", team = "payments" }`))
			r := runCLI(t, wf, map[string]any{"url": tg.URL + "/x", "note": "payload-marker-41d7"})
			if r.code != cli.ExitOK {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "logging.unsupported") || strings.Contains(r.stderr, "otel.export_failed") {
				t.Errorf("unexpected warning:\n%s", r.stderr)
			}
			// No waiting: Main returns only after Close flushed the spans.
			spans := rec.Spans()
			if errs := rec.Errors(); len(errs) > 0 {
				t.Fatalf("receiver could not decode the export: %v", errs)
			}
			if len(spans) != 4 {
				t.Fatalf("got %d spans, want 4 (run + 3 nodes): %+v", len(spans), spans)
			}
			for _, req := range rec.Requests() {
				if req.Protocol != protocol {
					t.Errorf("export arrived as %s, want %s", req.Protocol, protocol)
				}
				if protocol != ProtocolGRPC && req.Path != wantPath {
					t.Errorf("export posted to %s, want %s", req.Path, wantPath)
				}
				// OTEL_EXPORTER_OTLP_HEADERS is honoured by the SDK.
				if got := req.Header["authorization"]; len(got) != 1 || got[0] != "Bearer otlp-token-5e2a" {
					t.Errorf("authorization header = %q", got)
				}
				if got := req.Header["x-tenant"]; len(got) != 1 || got[0] != "team-a" {
					t.Errorf("x-tenant header = %q", got)
				}
			}
			s := byName(spans)
			run := s["traced"]
			if run.SpanID == "" || run.ParentSpanID != "" {
				t.Fatalf("run span %+v (want a root span named after the workflow)", run)
			}
			if run.Attrs[AttrExecutionID] == "" || run.Scope != InstrumentationName {
				t.Errorf("run span %+v", run)
			}
			wantAttrs(t, "run span", run.Attrs, map[string]string{
				AttrWorkflow: "traced", AttrTriggerKind: "manual", AttrStatus: "completed",
				AttrLastNode: "done", AttrDryRun: "false", AttrDepth: "0",
			})
			wantAttrs(t, "resource", run.Resource, map[string]string{
				"service.name": "billing", "deployment.environment": "test", "team": "payments",
				"kiln.version": "devel", "telemetry.sdk.language": "go",
			})
			for i, id := range []string{"fetch", "ok", "done"} {
				n, ok := s[id]
				if !ok {
					t.Fatalf("no span for node %s", id)
				}
				if n.TraceID != run.TraceID || n.ParentSpanID != run.SpanID {
					t.Errorf("node %s span is not a child of the run span: %+v vs run %s/%s", id, n, run.TraceID, run.SpanID)
				}
				kind := []string{"http_request", "condition", "terminate"}[i]
				wantAttrs(t, "node "+id, n.Attrs, map[string]string{AttrNodeID: id, AttrNodeKind: kind, AttrNodeAttempt: "1"})
				if n.Status == "ERROR" {
					t.Errorf("node %s: error status %q", id, n.StatusMessage)
				}
			}
			wantAttrs(t, "node ok", s["ok"].Attrs, map[string]string{AttrNodeBranch: "true", AttrNodeAction: "continue"})
			wantAttrs(t, "node done", s["done"].Attrs, map[string]string{AttrNodeAction: "terminate"})

			// The callee saw the fetch node's span as its parent.
			want := "00-" + run.TraceID + "-" + s["fetch"].SpanID + "-01"
			if got := tg.seen(); len(got) != 1 || got[0] != want {
				t.Errorf("outbound traceparent = %q, want %q", got, want)
			}
			// Neither the trigger payload, nor a node output, nor the
			// header credentials reach the collector as span data.
			noLeak(t, rec, "payload-marker-41d7", outputMarker, tg.URL+"/x")
			if strings.Contains(r.stderr, "otlp-token-5e2a") {
				t.Errorf("the OTLP header credential reached the log")
			}
		})
	}
}

// TestIncomingTraceparent: a run under a caller's trace (the traceparent
// the HTTP server puts on the run context) continues that trace, with
// the caller's span as the run span's parent; an OTel span already on ctx
// wins. The trigger.traceparent fallback is what a one-shot run gets from
// its --input.
func TestIncomingTraceparent(t *testing.T) {
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
		caller      = "00-" + callerTrace + "-" + callerSpan + "-01"
	)
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			rec, endpoint := collector(t, protocol)
			tg := newTarget(t)
			wf := fetchWorkflow(t, tg, "")
			p := start(t, endpoint, protocol, 1)
			rep := run(t, p, wf, runtime.WithTraceparent(context.Background(), caller), map[string]any{"url": tg.URL})
			if rep.Outcome.Status != runtime.StatusCompleted {
				t.Fatalf("outcome %+v", rep.Outcome)
			}
			flush(t, p)
			s := byName(rec.WaitSpans(t, 4, 10*time.Second))
			run := s["traced"]
			if run.TraceID != callerTrace || run.ParentSpanID != callerSpan {
				t.Errorf("run span trace %s parent %s, want %s %s", run.TraceID, run.ParentSpanID, callerTrace, callerSpan)
			}
			if s["fetch"].TraceID != callerTrace || s["fetch"].ParentSpanID != run.SpanID {
				t.Errorf("node span %+v", s["fetch"])
			}
			if got := tg.seen(); len(got) != 1 || got[0] != "00-"+callerTrace+"-"+s["fetch"].SpanID+"-01" {
				t.Errorf("outbound traceparent %q", got)
			}
		})
	}
	t.Run("trigger.traceparent", func(t *testing.T) {
		rec, endpoint := collector(t, ProtocolHTTPProtobuf)
		tg := newTarget(t)
		r := runCLI(t, fetchWorkflow(t, tg, otelBlock(endpoint, ProtocolHTTPProtobuf, "")),
			map[string]any{"url": tg.URL, "traceparent": caller})
		if r.code != cli.ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		run := byName(rec.Spans())["traced"]
		if run.TraceID != callerTrace || run.ParentSpanID != callerSpan {
			t.Errorf("run span %+v", run)
		}
	})
}

// start starts a pipeline with the test's audit log discarded.
func start(t *testing.T, endpoint, protocol string, ratio float64) *Pipeline {
	t.Helper()
	cfg, err := NewConfig(&workflow.OTelLog{Endpoint: endpoint, Protocol: protocol, SampleRatio: &ratio}, "traced")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

func flush(t *testing.T, p *Pipeline) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
}

// run runs wf once on an engine observed by p.
func run(t *testing.T, p *Pipeline, wf *workflow.Workflow, ctx context.Context, payload map[string]any) *runtime.Report {
	t.Helper()
	prog, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &runtime.Engine{Observer: p.Observer()}
	return e.Run(ctx, prog, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", runtime.Normalize(payload))})
}

// TestSampleRatioZero: sample_ratio = 0 exports nothing for a new trace,
// yet the outbound traceparent still propagates (unsampled), and a
// caller's sampled trace is still followed (parent-based sampling).
func TestSampleRatioZero(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			rec, endpoint := collector(t, protocol)
			tg := newTarget(t)
			r := runCLI(t, fetchWorkflow(t, tg, otelBlock(endpoint, protocol, "sample_ratio = 0.0")), map[string]any{"url": tg.URL})
			if r.code != cli.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if reqs := rec.Requests(); len(reqs) != 0 {
				t.Errorf("sample_ratio = 0 exported %d requests: %+v", len(reqs), rec.Spans())
			}
			if got := tg.seen(); len(got) != 1 || !runtime.ValidTraceparent(got[0]) || !strings.HasSuffix(got[0], "-00") {
				t.Errorf("outbound traceparent %q, want a valid unsampled one", got)
			}

			// A sampled caller overrides the ratio.
			caller := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			r = runCLI(t, fetchWorkflow(t, tg, otelBlock(endpoint, protocol, "sample_ratio = 0.0")),
				map[string]any{"url": tg.URL, "traceparent": caller})
			if r.code != cli.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if spans := rec.Spans(); len(spans) != 4 || spans[0].TraceID != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("a sampled caller's trace was not exported: %+v", spans)
			}
		})
	}
}

// TestFailingNodeAndRedaction: a node that fails has an error span with
// its error class, the run span says errored, and a registered secret in
// the failure reason is redacted everywhere in the export.
func TestFailingNodeAndRedaction(t *testing.T) {
	const secret = "hunter2-otel-7f3b9"
	runtime.RedactValue(secret)
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			rec, endpoint := collector(t, protocol)
			wf := decode(t, `
name = "reader"

[[nodes]]
id = "read"
type = "read_file"
path_from = "trigger.path"

[policy.fs]
read = ["/nonexistent-kiln-otel/**"]

`+otelBlock(endpoint, protocol, ""))
			r := runCLI(t, wf, map[string]any{"path": "/tmp/" + secret + "/key.pem"})
			if r.code != cli.ExitFailed {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			s := byName(rec.Spans())
			node, run := s["read"], s["reader"]
			if node.Status != "ERROR" || node.Attrs[AttrErrorClass] != "policy" ||
				!strings.Contains(node.StatusMessage, "denied on") || !strings.Contains(node.StatusMessage, runtime.RedactedMarker) {
				t.Errorf("failing node span %+v", node)
			}
			if run.Status != "ERROR" || run.Attrs[AttrStatus] != runtime.StatusErrored || run.Attrs[AttrErrorClass] != "policy" ||
				!strings.Contains(run.Attrs[AttrReason], runtime.RedactedMarker) {
				t.Errorf("run span %+v", run)
			}
			noLeak(t, rec, secret)
		})
	}
}

// TestReasonsOmitted: [logging.audit] include_reason = false keeps
// reasons and error messages out of spans as it does out of the log.
func TestReasonsOmitted(t *testing.T) {
	rec, endpoint := collector(t, ProtocolHTTPProtobuf)
	wf := decode(t, `
name = "quiet"

[[nodes]]
id = "read"
type = "read_file"
path_from = "trigger.path"

[policy.fs]
read = ["/nonexistent-kiln-otel/**"]

[logging.audit]
include_reason = false

`+otelBlock(endpoint, ProtocolHTTPProtobuf, ""))
	if r := runCLI(t, wf, map[string]any{"path": "/etc/hostname-quiet"}); r.code != cli.ExitFailed {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	s := byName(rec.Spans())
	if s["read"].Status != "ERROR" || s["read"].StatusMessage != "policy error" || s["quiet"].Attrs[AttrReason] != "" {
		t.Errorf("spans %+v", s)
	}
	noLeak(t, rec, "hostname-quiet")
}

// TestChildRunSpans: a call node's child run is a child span of the call
// node's span, and the child's nodes nest under the child run.
func TestChildRunSpans(t *testing.T) {
	rec, endpoint := collector(t, ProtocolHTTPProtobuf)
	wf := decode(t, `
name = "parent"

[[nodes]]
id = "sub"
type = "call"
workflow = "child.toml"

`+otelBlock(endpoint, ProtocolHTTPProtobuf, ""))
	wf.Children = map[string]*workflow.Workflow{"child.toml": decode(t, `
name = "child"

[[nodes]]
id = "leaf"
type = "terminate"
`)}
	if r := runCLI(t, wf, map[string]any{}); r.code != cli.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	s := byName(rec.Spans())
	parent, sub, child, leaf := s["parent"], s["sub"], s["child"], s["leaf"]
	if sub.ParentSpanID != parent.SpanID || child.ParentSpanID != sub.SpanID || leaf.ParentSpanID != child.SpanID ||
		leaf.TraceID != parent.TraceID {
		t.Errorf("span tree wrong:\n parent %+v\n sub %+v\n child %+v\n leaf %+v", parent, sub, child, leaf)
	}
	if child.Attrs[AttrDepth] != "1" || !strings.HasPrefix(child.Attrs[AttrExecutionID], parent.Attrs[AttrExecutionID]+".") {
		t.Errorf("child run attributes %v", child.Attrs)
	}
}

// TestExportFailuresDoNotTouchRuns: a collector that rejects every export
// or never answers changes nothing for the run (status, exit code, time);
// the failure is reported once per kind on the audit log, and Close is
// bounded.
func TestExportFailuresDoNotTouchRuns(t *testing.T) {
	t.Run("rejected", func(t *testing.T) {
		rec, endpoint := collector(t, ProtocolHTTPProtobuf)
		rec.Fail(true)
		tg := newTarget(t)
		var logBuf firetest.Buffer
		audit := auditTo(&logBuf)
		batchOptions = []sdktrace.BatchSpanProcessorOption{sdktrace.WithBatchTimeout(20 * time.Millisecond)}
		t.Cleanup(func() { batchOptions = nil })
		cfg, err := NewConfig(&workflow.OTelLog{Endpoint: endpoint, Protocol: ProtocolHTTPProtobuf}, "traced")
		if err != nil {
			t.Fatal(err)
		}
		p, err := Start(context.Background(), cfg, audit)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Shutdown(context.Background())
		// Three runs, each exported (and rejected) by the background
		// batcher on its own schedule.
		for i := 1; i <= 3; i++ {
			rep := run(t, p, fetchWorkflow(t, tg, ""), context.Background(), map[string]any{"url": tg.URL})
			if rep.Outcome.Status != runtime.StatusCompleted {
				t.Fatalf("run %d: %+v", i, rep.Outcome)
			}
			waitFor(t, func() bool { return len(rec.Requests()) >= i })
		}
		waitFor(t, func() bool { return strings.Contains(logBuf.String(), "otel.export_failed") })
		if n := len(rec.Requests()); n != 3 {
			t.Errorf("%d export attempts, want 3", n)
		}
		if n := strings.Count(logBuf.String(), "otel.export_failed"); n != 1 {
			t.Errorf("%d export failure reports, want 1:\n%s", n, logBuf.String())
		}
	})
	t.Run("unresponsive", func(t *testing.T) {
		old := shutdownTimeout
		shutdownTimeout = 500 * time.Millisecond
		t.Cleanup(func() { shutdownTimeout = old })
		// Accepts connections and never answers.
		hang := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
		t.Cleanup(func() { close(hang); srv.Close() })
		tg := newTarget(t)
		r := runCLI(t, fetchWorkflow(t, tg, otelBlock(srv.URL, ProtocolHTTPProtobuf, "")), map[string]any{"url": tg.URL})
		if r.code != cli.ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		// The run itself is quick; only Close waits, up to its bound.
		if r.elapsed > shutdownTimeout+3*time.Second {
			t.Errorf("run once took %v with a hanging collector (Close bound %v)", r.elapsed, shutdownTimeout)
		}
		if !strings.Contains(r.stderr, "extension.close_failed") || !strings.Contains(r.stderr, "flushing spans to "+srv.URL+TracesPath) {
			t.Errorf("a flush that timed out is not reported:\n%s", r.stderr)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReporter: one report per kind of failure (kinds differing only in
// numbers are one), redacted, and a bounded number of kinds.
func TestReporter(t *testing.T) {
	const secret = "s3cret-in-export-error-91"
	runtime.RedactValue(secret)
	var buf firetest.Buffer
	r := newReporter(auditTo(&buf))
	r.Handle(fmt.Errorf("failed to send to http://c:4318/v1/traces: 503 Service Unavailable (retry in 5s)"))
	r.Handle(fmt.Errorf("failed to send to http://c:4318/v1/traces: 503 Service Unavailable (retry in 17s)"))
	r.Handle(fmt.Errorf("token %s rejected", secret))
	r.Handle(nil)
	out := buf.String()
	if n := strings.Count(out, "otel.export_failed"); n != 2 {
		t.Errorf("%d reports, want 2:\n%s", n, out)
	}
	if strings.Contains(out, secret) || !strings.Contains(out, "token [REDACTED] rejected") {
		t.Errorf("not redacted:\n%s", out)
	}
	for i := 0; i < 3*maxKinds; i++ {
		r.Handle(fmt.Errorf("kind %c", 'A'+i))
	}
	if n := strings.Count(buf.String(), "otel.export_failed"); n != maxKinds+1 {
		t.Errorf("%d reports after many kinds, want %d", n, maxKinds+1)
	}
}
