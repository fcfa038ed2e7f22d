package gen_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/otel/otlptest"
	"github.com/kilnworks/kiln/gen"
)

// TestBuildOTel seals a workflow with [logging.otel], runs the binary once
// against an in-process OTLP/gRPC receiver and sees its spans arrive
// before the process exits. Built with a profile that denies the otel
// family (--degrade), the same workflow runs untraced and says so.
func TestBuildOTel(t *testing.T) {
	rec, addr := otlptest.NewGRPC(t, nil)
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflow.toml")
	writeFile(t, wf, []byte(`name = "sealed-otel"

[[nodes]]
id = "who"
type = "read_env"
key = "USER"

[[nodes]]
id = "greet"
type = "template_render"
template = "Hello, {{who.value}}"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "who"
to = "greet"

[[edges]]
from = "greet"
to = "done"

[policy]
env = { read_keys = ["USER"] }

[logging.otel]
endpoint = "http://`+addr+`"
protocol = "grpc"
service_name = "sealed-svc"
`))
	res, err := gen.Build(context.Background(), gen.BuildOptions{
		Workflow: wf, Output: filepath.Join(dir, "bin", "sealed-otel"), KilnSource: repoRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Plan.Families, "otel") {
		t.Fatalf("families %v do not include otel", res.Plan.Families)
	}
	in, err := gen.Inspect(res.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if !in.OK() || !slices.Contains(in.LinkedFamilies, "otel") {
		t.Errorf("inspect: linked %v, problems %v", in.LinkedFamilies, in.Problems)
	}

	cmd := exec.Command(res.Binary, "--log-format", "json")
	cmd.Env = append(os.Environ(), "USER=otel-e2e-user")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sealed binary: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if strings.Contains(stderr.String(), "logging.unsupported") {
		t.Errorf("a binary linking otel calls [logging.otel] unsupported:\n%s", stderr.String())
	}
	// The process has exited: whatever it exported is here now.
	spans := rec.Spans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4 (run + 3 nodes): %+v\n%s", len(spans), spans, stderr.String())
	}
	var run otlptest.Span
	for _, s := range spans {
		if s.Name == "sealed-otel" {
			run = s
		}
	}
	if run.SpanID == "" || run.Attrs["kiln.status"] != "completed" || run.Resource["service.name"] != "sealed-svc" {
		t.Fatalf("run span %+v", run)
	}
	for _, s := range spans {
		if s.Name != run.Name && (s.ParentSpanID != run.SpanID || s.TraceID != run.TraceID) {
			t.Errorf("span %s is not a child of the run span", s.Name)
		}
		for _, v := range s.Attrs {
			if strings.Contains(v, "otel-e2e-user") {
				t.Errorf("span %s carries a node output: %v", s.Name, s.Attrs)
			}
		}
	}

	t.Run("degraded without otel", func(t *testing.T) {
		profile := filepath.Join(dir, "no-otel.toml")
		writeFile(t, profile, []byte("name = \"no-otel\"\ndeny = [\"otel\"]\n"))
		p, err := gen.LoadProfile(profile)
		if err != nil {
			t.Fatal(err)
		}
		res, err := gen.Build(context.Background(), gen.BuildOptions{
			Workflow: wf, Output: filepath.Join(dir, "bin", "degraded"), KilnSource: repoRoot(t),
			Plan: gen.PlanOptions{Profile: p, Degrade: true}})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(res.Plan.Families, "otel") || !slices.Contains(res.Plan.Degraded, "telemetry.otel") {
			t.Fatalf("families %v degraded %v", res.Plan.Families, res.Plan.Degraded)
		}
		before := len(rec.Requests())
		cmd := exec.Command(res.Binary, "--log-format", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("degraded binary: %v\n%s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), `"msg":"logging.unsupported"`) || !strings.Contains(stderr.String(), "[logging.otel]") {
			t.Errorf("no warning that [logging.otel] is ignored:\n%s", stderr.String())
		}
		if n := len(rec.Requests()); n != before {
			t.Errorf("a binary without otel exported %d requests", n-before)
		}
	})
}
