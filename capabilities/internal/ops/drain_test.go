package ops_test

import (
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/capabilities/internal/ops/opstest"
	_ "github.com/kilnworks/kiln/capabilities/interval"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const blockWorkflow = `
name = "slow"
[[start_nodes]]
name = "tick"
source = "event"
entry_node = "wait"
[[triggers]]
type = "interval"
every = "1s"
start_node = "tick"
[[nodes]]
id = "wait"
type = "firetest_block"
`

// TestReadinessWhileDraining runs the real serve loop of an interval
// agent with --ops-bind: while a run is in flight the ops listener is
// ready and counts it as active (and the ticks it makes skip); after
// SIGTERM, while the run drains, /readyz answers 503 "draining" on the
// same listener instead of refusing connections; the run finishes and the
// process exits 0.
func TestReadinessWhileDraining(t *testing.T) {
	firetest.Drain()
	var wf workflow.Workflow
	if _, err := toml.Decode(blockWorkflow, &wf); err != nil {
		t.Fatal(err)
	}
	log := &firetest.Buffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- cli.Main([]string{"--ops-bind", "127.0.0.1:0", "--drain-timeout-secs", "20", "--log-format", "json"},
			cli.Options{Prog: "slow", Workflow: &wf, Stdout: &firetest.Buffer{}, Stderr: log, Env: func(string) string { return "" }})
	}()
	t.Cleanup(func() { firetest.Release <- struct{}{} })
	addrRE := regexp.MustCompile(`"msg":"ops.listening","addr":"([0-9.:]+)"`)
	log.WaitFor(t, `"msg":"ops.listening"`)
	base := "http://" + addrRE.FindStringSubmatch(log.String())[1]
	log.WaitFor(t, `"msg":"workflow.started"`)
	log.WaitFor(t, `"msg":"interval.skipped"`) // the next tick found the run in flight

	if code, body := get(t, "GET", base+"/readyz"); code != 200 {
		t.Fatalf("/readyz while serving: %d %s", code, body)
	}
	_, text := get(t, "GET", base+"/metrics")
	m, _ := opstest.Parse(t, text)
	if m[`kiln_runs_active{workflow="slow"}`] != 1 {
		t.Errorf("active runs %v, want 1:\n%s", m[`kiln_runs_active{workflow="slow"}`], text)
	}
	if m[`kiln_trigger_skipped_total{trigger="interval[0] 1s",workflow="slow"}`] < 1 {
		t.Errorf("skipped tick not counted:\n%s", text)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	log.WaitFor(t, `"msg":"serve.draining"`)
	code, body := get(t, "GET", base+"/readyz")
	if code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("/readyz while draining: %d %s, want 503 draining", code, body)
	}
	if code, _ := get(t, "GET", base+"/healthz"); code != 200 {
		t.Fatalf("/healthz while draining: %d, want 200 (alive, not ready)", code)
	}
	firetest.Release <- struct{}{}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after the drain:\n%s", log)
	}
	if !strings.Contains(log.String(), `"msg":"interval.completed"`) {
		t.Fatalf("the in-flight run did not complete:\n%s", log)
	}
}
