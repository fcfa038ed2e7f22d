package timeline_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/graph"
	"github.com/kilnworks/kiln/gen/timeline"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/tape"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// sample is a run with a retry, a loop iteration, a failed attempt, a
// branch and an output that tries to inject markup.
func sample() *tape.Tape {
	return &tape.Tape{
		Tape: tape.Version, Workflow: "sample", ExecutionID: "run-1", Status: "completed", WallMS: 40,
		Trigger: map[string]any{"kind": "manual"},
		Trace:   &runtime.Trace{Entries: []runtime.TraceEntry{}},
		Attempts: []tape.Attempt{
			{Node: "fetch", Kind: "http_request", Attempt: 1, StartMS: 0, DurationMS: 5, Status: "error",
				Error: &tape.Err{Class: "tool", Message: "connection refused"}},
			{Node: "fetch", Kind: "http_request", Attempt: 2, StartMS: 6, DurationMS: 10, Status: "continue",
				Output: map[string]any{"status": 200, "body": "<img src=x onerror=alert(1)>"}, Input: []int{0}},
			{Node: "check", Kind: "condition", Attempt: 1, StartMS: 16, DurationMS: 1, Status: "continue", Branch: "true",
				Output: map[string]any{"value": true}},
			{Node: "step", Kind: "template_render", Attempt: 1, StartMS: 17, DurationMS: 3, Status: "continue",
				Output: map[string]any{"rendered": "first pass"}},
			{Node: "step", Kind: "template_render", Attempt: 1, StartMS: 20, DurationMS: 3, Status: "continue",
				Output: map[string]any{"rendered": "second pass"}},
			{Node: "summary", Kind: "template_render", Attempt: 1, StartMS: 23, DurationMS: 17, Status: "continue",
				Output: map[string]any{"rendered": "the summary output 42"}},
		},
		Interactions: []tape.Interaction{{Seq: 0, Node: "fetch", Attempt: 2, Kind: "http.request",
			Request: []byte(`{"method":"GET","url":"http://127.0.0.1:9/x"}`), Response: []byte(`{"status":200}`)}},
	}
}

// chromium loads page in headless Chromium with #test-click=node (the page
// opens that node's panel on load) and returns the DOM after its scripts
// ran; it saves a screenshot under dir. Chromium and every process it
// started are killed at the end (process group).
func chromium(t *testing.T, bin, page, node, dir string) string {
	t.Helper()
	url := "file://" + page + "#test-click=" + node
	run := func(extra ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--enable-logging=stderr",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, extra...)
		cmd := exec.CommandContext(ctx, bin, append(args, url)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers (zygote, GPU) left behind
		}
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
		}
		// The page's policy blocks anything it did not pin: a refusal
		// means part of the page did not work.
		if strings.Contains(stderr.String(), "Content Security Policy") {
			t.Fatalf("the page broke its own policy:\n%s", stderr.String())
		}
		return stdout.Bytes()
	}
	dom := run("--dump-dom")
	shot := filepath.Join(dir, "timeline.png")
	run("--window-size=1400,800", "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot: %v", err)
	}
	return string(dom)
}

var barRE = regexp.MustCompile(`<button[^>]*class="bar[^"]*"[^>]*data-node="([^"]+)"`)

func panel(t *testing.T, dom, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<[a-z0-9]+ id="` + id + `"[^>]*>(.*?)</`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no #%s in the DOM:\n%s", id, dom)
	}
	return m[1]
}

func TestPageInChromium(t *testing.T) {
	bin := testtool.Command(t, "chromium")
	dir := t.TempDir()
	page := filepath.Join(dir, "run.html")
	var b bytes.Buffer
	if err := timeline.HTML(&b, []timeline.Run{{Label: "run.json", Tape: sample()}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(page, b.Bytes(), 0o644)

	dom := chromium(t, bin, page, "summary", dir)
	bars := map[string]int{}
	for _, m := range barRE.FindAllStringSubmatch(dom, -1) {
		bars[m[1]]++
	}
	if bars["fetch"] != 2 || bars["check"] != 1 || bars["step"] != 2 || bars["summary"] != 1 {
		t.Fatalf("bars per node = %v", bars)
	}
	if !strings.Contains(dom, "retry 1") || !strings.Contains(dom, "iteration 2") ||
		!regexp.MustCompile(`class="bar[^"]*\berror\b`).MatchString(dom) || !regexp.MustCompile(`class="branch"[^>]*>true<`).MatchString(dom) {
		t.Fatalf("retry, iteration, failed attempt or branch not shown:\n%s", dom)
	}
	if out := panel(t, dom, "panel-output"); !strings.Contains(out, "the summary output 42") {
		t.Fatalf("panel output = %q", out)
	}
	// The injected markup stays text.
	dom = chromium(t, bin, page, "fetch", dir)
	if out := panel(t, dom, "panel-output"); !strings.Contains(out, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Fatalf("panel output = %q", out)
	}
	if in := panel(t, dom, "panel-input"); !strings.Contains(in, "http.request") {
		t.Fatalf("panel input = %q", in)
	}
}

// A replay's page shows the recorded and the replayed run side by side,
// the diverging node marked, and its panel the old and new values.
func TestReplayPageInChromium(t *testing.T) {
	bin := testtool.Command(t, "chromium")
	dir := t.TempDir()
	old, nt := sample(), sample()
	nt.Attempts[5].Output = map[string]any{"rendered": "a changed summary"}
	div := &tape.Divergence{Step: 3, Node: "summary", What: "output",
		Old: map[string]any{"rendered": "the summary output 42"}, New: map[string]any{"rendered": "a changed summary"}}
	wf, err := gen.Decode("sample.toml", []byte(sampleTOML))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(wf, graph.Options{Path: &graph.Path{Nodes: []string{"fetch", "check", "step", "step", "summary"}}})
	if err != nil {
		t.Fatal(err)
	}
	svg, err := g.SVG()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := timeline.HTML(&b, []timeline.Run{{Label: "recorded", Tape: old}, {Label: "replayed", Tape: nt}}, div, svg); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "replay.html")
	os.WriteFile(page, b.Bytes(), 0o644)
	dom := chromium(t, bin, page, "summary", dir)
	if n := strings.Count(dom, `class="lane"`); n != 2 {
		t.Fatalf("%d lanes", n)
	}
	if !strings.Contains(dom, `<section id="graph"><svg`) {
		t.Fatalf("no graph:\n%s", dom)
	}
	// The highlighted boxes are exactly the nodes the run visited.
	var lit []string
	for _, m := range regexp.MustCompile(`<g id="[^"]*" class="node[^"]*\bvisited\b[^"]*" data-node="([^"]*)"`).FindAllStringSubmatch(dom, -1) {
		lit = append(lit, m[1])
	}
	sort.Strings(lit)
	if want := []string{"check", "fetch", "step", "summary"}; !slices.Equal(lit, want) {
		t.Fatalf("highlighted %v, the run visited %v", lit, want)
	}
	if !strings.Contains(dom, `data-node="skipped"`) {
		t.Fatalf("the unvisited node is not drawn:\n%s", dom)
	}
	if !regexp.MustCompile(`class="bar[^"]*\bdiverged\b[^"]*"[^>]*data-node="summary"`).MatchString(dom) {
		t.Fatalf("diverging bar not marked:\n%s", dom)
	}
	if out := panel(t, dom, "panel-output"); !strings.Contains(out, "a changed summary") {
		t.Fatalf("panel output = %q", out)
	}
	if o, n := panel(t, dom, "panel-old"), panel(t, dom, "panel-new"); !strings.Contains(o, "the summary output 42") || !strings.Contains(n, "a changed summary") {
		t.Fatalf("compare: old %q new %q", o, n)
	}
}

// sampleTOML is the workflow sample() ran.
const sampleTOML = `
name = "sample"
[[start_nodes]]
name = "main"
source = "manual"
[[nodes]]
id = "fetch"
type = "template_render"
template = "x"
[[nodes]]
id = "check"
type = "condition"
expr = "fetch.rendered"
[[nodes]]
id = "step"
type = "template_render"
template = "y"
[[nodes]]
id = "summary"
type = "template_render"
template = "z"
[[nodes]]
id = "skipped"
type = "template_render"
template = "s"
[[edges]]
from = "fetch"
to = "check"
[[edges]]
from = "check"
to = "step"
when = "true"
[[edges]]
from = "check"
to = "skipped"
when = "false"
[[edges]]
from = "step"
to = "step"
max_iterations = 1
[[edges]]
from = "step"
to = "summary"
`
