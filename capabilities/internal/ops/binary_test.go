package ops_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/ops/opstest"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// beatWorkflow is an interval agent: no http routes, so its sealed binary
// links no http family and, before --ops-bind, could not be monitored.
const beatWorkflow = `
name = "beat"
[[start_nodes]]
name = "heartbeat"
source = "event"
entry_node = "render"
[[triggers]]
type = "interval"
every = "1s"
start_node = "heartbeat"
[[nodes]]
id = "render"
type = "template_render"
template = "tick {{trigger.payload.tick}}"
[policy]
`

// TestOpsOnIntervalBinary builds a sealed interval agent without the http
// family, serves it with --ops-bind on loopback, and checks /healthz,
// /readyz and a /metrics that the Prometheus parser (and promtool, when
// installed) accepts, with the trigger's runs counted; SIGTERM ends it
// with exit 0.
func TestOpsOnIntervalBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a sealed binary")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(src, []byte(beatWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := gen.Build(context.Background(), gen.BuildOptions{
		Workflow: src, Output: filepath.Join(dir, "beat"), KilnSource: testtool.RepoRoot(t),
		Plan: gen.PlanOptions{KilnVersion: "v0.0.0-opstest"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(res.Plan.Families, "http") {
		t.Fatalf("families %v: the interval agent must not link the http family", res.Plan.Families)
	}

	cmd := exec.Command(res.Binary, "--ops-bind", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = append(os.Environ(), "KILN_BIND=") // nothing else listens
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	log := &lines{}
	addrc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`"msg":"ops.listening".*"addr":"([0-9.:]+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.add(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
			}
		}
		exited <- cmd.Wait()
	}()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("no ops.listening line:\n%s", log)
	}

	code, body := get(t, "GET", base+"/healthz")
	if code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	code, body = get(t, "GET", base+"/readyz")
	if code != 200 || !strings.Contains(body, `"status":"ready"`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	if code, _ := get(t, "POST", base+"/metrics"); code != 405 {
		t.Fatalf("POST /metrics: %d, want 405", code)
	}
	if code, _ := get(t, "GET", base+"/hook"); code != 404 {
		t.Fatalf("GET /hook: %d, want 404", code)
	}

	// Wait (generously: the trigger ticks every second) for a completed run.
	var exposition string
	var samples map[string]float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, exposition = get(t, "GET", base+"/metrics")
		samples, _ = opstest.Parse(t, exposition)
		if samples[`kiln_runs_total{start_node="heartbeat",status="completed",workflow="beat"}`] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed run counted:\n%s\nlog:\n%s", exposition, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	const trig = `trigger="interval[0] 1s",workflow="beat"`
	if samples[`kiln_trigger_fires_total{`+trig+`}`] < 1 {
		t.Errorf("trigger fires not counted:\n%s", exposition)
	}
	if _, ok := samples[`kiln_trigger_skipped_total{`+trig+`}`]; !ok {
		t.Errorf("no skipped series for the trigger:\n%s", exposition)
	}
	if samples[`kiln_node_duration_seconds_count{kind="template_render",workflow="beat"}`] < 1 {
		t.Errorf("node attempts not timed:\n%s", exposition)
	}
	buildInfo := regexp.MustCompile(`kiln_build_info\{workflow="beat",version="v0.0.0-opstest",tables_sha256="` + res.Plan.Manifest.TablesSHA256 + `"\} 1`)
	if !buildInfo.MatchString(exposition) {
		t.Errorf("kiln_build_info does not name the build (tables %s):\n%s", res.Plan.Manifest.TablesSHA256, exposition)
	}
	promtoolCheck(t, exposition)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", log)
	}
}

// promtoolCheck runs `promtool check metrics` on the exposition: the
// linter Prometheus itself ships (names, units, HELP, histogram shape).
func promtoolCheck(t *testing.T, exposition string) {
	t.Helper()
	promtool := testtool.Command(t, "promtool")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out, exposition)
	}
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, string(b)
}

// lines collects a process's log lines.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}
