package otel

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// auditTo is a JSON audit logger writing to w, redacting like the real one.
func auditTo(w *firetest.Buffer) *slog.Logger {
	l, _, err := runtime.NewAuditLogger(runtime.AuditOptions{Format: "json", Stderr: w})
	if err != nil {
		panic(err)
	}
	return l
}

func TestNewConfig(t *testing.T) {
	half := 0.5
	for _, c := range []struct {
		name     string
		in       workflow.OTelLog
		env      map[string]string
		endpoint string
		protocol string
		ratio    float64
		err      string
	}{
		{name: "http without path gets /v1/traces", in: workflow.OTelLog{Endpoint: "http://127.0.0.1:4318", Protocol: "http/protobuf"},
			endpoint: "http://127.0.0.1:4318/v1/traces", protocol: "http/protobuf", ratio: 1},
		{name: "http with / gets /v1/traces", in: workflow.OTelLog{Endpoint: "https://otlp.example.com/", Protocol: "http/json", SampleRatio: &half},
			endpoint: "https://otlp.example.com/v1/traces", protocol: "http/json", ratio: 0.5},
		{name: "http path used as given", in: workflow.OTelLog{Endpoint: "https://otlp.example.com/api/v2/otlp", Protocol: "http/protobuf"},
			endpoint: "https://otlp.example.com/api/v2/otlp", protocol: "http/protobuf", ratio: 1},
		{name: "grpc keeps host:port", in: workflow.OTelLog{Endpoint: "http://127.0.0.1:4317/", Protocol: "grpc"},
			endpoint: "http://127.0.0.1:4317", protocol: "grpc", ratio: 1},
		{name: "protocol defaults to http/protobuf", in: workflow.OTelLog{Endpoint: "http://c:4318"},
			endpoint: "http://c:4318/v1/traces", protocol: "http/protobuf", ratio: 1},
		{name: "protocol from the traces variable", in: workflow.OTelLog{Endpoint: "http://c:4317"},
			env:      map[string]string{EnvProtocol: "http/json", EnvTracesProtocol: "grpc"},
			endpoint: "http://c:4317", protocol: "grpc", ratio: 1},
		{name: "protocol from the general variable", in: workflow.OTelLog{},
			env: map[string]string{EnvProtocol: "http/json"}, protocol: "http/json", ratio: 1},
		{name: "no endpoint leaves it to the SDK", in: workflow.OTelLog{Protocol: "grpc"}, protocol: "grpc", ratio: 1},
		{name: "grpc with a path", in: workflow.OTelLog{Endpoint: "http://c:4317/v1/traces", Protocol: "grpc"}, err: "without a path"},
		{name: "credentials in the URL", in: workflow.OTelLog{Endpoint: "https://user:pw@c:4318"}, err: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "query", in: workflow.OTelLog{Endpoint: "https://c:4318/v1/traces?api_key=x"}, err: "no query"},
		{name: "not http", in: workflow.OTelLog{Endpoint: "ftp://c"}, err: "http(s) URL"},
		{name: "bad protocol", in: workflow.OTelLog{Endpoint: "http://c", Protocol: "thrift"}, err: `protocol "thrift"`},
		{name: "bad protocol variable", in: workflow.OTelLog{}, env: map[string]string{EnvProtocol: "zipkin"}, err: `protocol "zipkin"`},
		{name: "ratio out of range", in: workflow.OTelLog{SampleRatio: ptr(1.5)}, err: "sample_ratio"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvProtocol, c.env[EnvProtocol])
			t.Setenv(EnvTracesProtocol, c.env[EnvTracesProtocol])
			got, err := NewConfig(&c.in, "wf")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Endpoint != c.endpoint || got.Protocol != c.protocol || got.SampleRatio != c.ratio || got.DefaultService != "wf" {
				t.Errorf("config %+v", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSetupFindsTheBlock: the extension installs an Observer only for a
// program with [logging.otel] (in the root, else a child), warns about a
// differing second block, and Close is safe with or without a pipeline.
func TestSetupFindsTheBlock(t *testing.T) {
	_, endpoint := collector(t, ProtocolHTTPProtobuf)
	otelLog := &workflow.Logging{OTel: &workflow.OTelLog{Endpoint: endpoint}}
	other := &workflow.Logging{OTel: &workflow.OTelLog{Endpoint: endpoint, ServiceName: "other"}}
	leaf := func(name string, lg *workflow.Logging) *workflow.Workflow {
		return &workflow.Workflow{Name: name, Logging: lg, Nodes: []workflow.Node{{ID: "end", Type: "terminate"}}}
	}
	caller := func(lg *workflow.Logging, children map[string]*workflow.Workflow) *workflow.Workflow {
		wf := &workflow.Workflow{Name: "root", Logging: lg, Children: children}
		for path := range children {
			wf.Nodes = append(wf.Nodes, workflow.Node{ID: "call_" + strings.TrimSuffix(path, ".toml"), Type: "call", Workflow: path})
		}
		return wf
	}
	for _, c := range []struct {
		name     string
		wf       *workflow.Workflow
		observed bool
		ignored  string
	}{
		{"none", leaf("plain", &workflow.Logging{Level: "debug"}), false, ""},
		{"root", leaf("root", otelLog), true, ""},
		{"child only", caller(nil, map[string]*workflow.Workflow{"a.toml": leaf("a", otelLog)}), true, ""},
		{"two differing", caller(otelLog, map[string]*workflow.Workflow{"a.toml": leaf("a", otelLog), "b.toml": leaf("b", other)}), true, "b.toml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog, err := runtime.Compile(c.wf, runtime.CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var buf firetest.Buffer
			h := &runtime.Host{Engine: &runtime.Engine{Audit: auditTo(&buf)}, Program: prog}
			if err := setup(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			if got := h.Engine.Observer != nil; got != c.observed {
				t.Errorf("observer installed = %v, want %v", got, c.observed)
			}
			if got := strings.Contains(buf.String(), "otel.config_ignored"); got != (c.ignored != "") || !strings.Contains(buf.String(), c.ignored) {
				t.Errorf("ignored warning (want %q):\n%s", c.ignored, buf.String())
			}
			if err := closeActive(); err != nil {
				t.Errorf("close: %v", err)
			}
			if err := closeActive(); err != nil { // nothing left to close
				t.Errorf("second close: %v", err)
			}
		})
	}
}

// TestSetupRejectsBadConfig: a bad block fails the start-up with a clear
// error (exit 2) instead of running untraced.
func TestSetupRejectsBadConfig(t *testing.T) {
	wf := &workflow.Workflow{Name: "bad", Nodes: []workflow.Node{{ID: "end", Type: "terminate"}},
		Logging: &workflow.Logging{OTel: &workflow.OTelLog{Endpoint: "https://user:secretpw@c:4318"}}}
	r := runCLI(t, wf, map[string]any{})
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "otel: [logging.otel]: endpoint must not carry credentials") {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
}
