package metrics_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"

	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/capabilities/internal/ops/opstest"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestSetCountsRunsNodesAndDenials fires runs through a host with the Set
// attached: runs by start node and status, node attempts by kind, policy
// denials by the denied kind's family (fs, from the first scrape at 0),
// all read back with the Prometheus parser.
func TestSetCountsRunsNodesAndDenials(t *testing.T) {
	dir := t.TempDir()
	src := `
name = "files"
[[start_nodes]]
name = "save"
entry_node = "render"
[[nodes]]
id = "render"
type = "template_render"
template = "hello"
[[nodes]]
id = "write"
type = "write_file"
path_from = "trigger.path"
content_from = "render"
[[edges]]
from = "render"
to = "write"
[policy.fs]
write = ["` + dir + `/**"]
`
	var wf workflow.Workflow
	if _, err := toml.Decode(src, &wf); err != nil {
		t.Fatal(err)
	}
	p, err := runtime.Compile(&wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &runtime.Host{Engine: &runtime.Engine{}, Program: p, ServeMode: true}
	set := metrics.Attach(h)
	if metrics.Attach(h) != set || metrics.Of(h) != set {
		t.Fatal("Attach is not idempotent")
	}
	scrape := func() map[string]float64 {
		var b bytes.Buffer
		if err := set.Write(&b); err != nil {
			t.Fatal(err)
		}
		m, types := opstest.Parse(t, b.String())
		if types["kiln_node_duration_seconds"] != "histogram" || types["kiln_runs_active"] != "gauge" {
			t.Fatalf("types %v", types)
		}
		return m
	}
	const fsDenials = `kiln_policy_denials_total{family="fs",workflow="files"}`
	if m := scrape(); m[fsDenials] != 0 {
		t.Fatalf("fs denials before any run: %v", m[fsDenials])
	} else if _, ok := m[fsDenials]; !ok {
		t.Fatalf("no fs denial series before the first denial")
	}

	fire := func(path string) string {
		rep := h.Fire(context.Background(), runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", map[string]any{"path": path})})
		return rep.Outcome.Status
	}
	if s := fire(filepath.Join(dir, "ok.txt")); s != runtime.StatusCompleted {
		t.Fatalf("allowed write: %s", s)
	}
	if s := fire(filepath.Join(t.TempDir(), "denied.txt")); s == runtime.StatusCompleted {
		t.Fatal("write outside the policy completed")
	}
	m := scrape()
	for k, want := range map[string]float64{
		`kiln_runs_total{start_node="save",status="completed",workflow="files"}`:    1,
		`kiln_runs_total{start_node="save",status="errored",workflow="files"}`:      1,
		`kiln_runs_active{workflow="files"}`:                                        0,
		fsDenials:                                                                   1,
		`kiln_node_duration_seconds_count{kind="template_render",workflow="files"}`: 2,
		`kiln_node_duration_seconds_count{kind="write_file",workflow="files"}`:      2,
		`kiln_node_retries_total{kind="write_file",workflow="files"}`:               0,
		`kiln_node_executions_total{workflow="files"}`:                              4,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
}
