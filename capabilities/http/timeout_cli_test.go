package http

import (
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestServeHonoursTimeoutSecs: `--timeout-secs` bounds the runs that
// requests start in serve mode (504 with the timed_out outcome), not only
// one-shot runs. Before, a serve-mode run could run forever.
func TestServeHonoursTimeoutSecs(t *testing.T) {
	resetGate() // never released: the node blocks until its deadline
	wf, err := gen.Decode("workflow.toml", []byte(wf("block", "")))
	if err != nil {
		t.Fatal(err)
	}
	stderr, stdout := &syncBuffer{}, &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- cli.Main([]string{"--bind", "127.0.0.1:0", "--timeout-secs", "1", "--drain-timeout-secs", "1", "--log-format", "json"},
			cli.Options{Prog: "agent", Workflow: wf, Stdout: stdout, Stderr: stderr})
	}()
	addrRE := regexp.MustCompile(`"msg":"http.listening","workflow":"hooks","addr":"([0-9.:]+)"`)
	waitFor(t, func() bool { return addrRE.MatchString(stderr.String()) })
	ts := &testServer{URL: "http://" + addrRE.FindStringSubmatch(stderr.String())[1], Client: newClient()}

	start := time.Now()
	r := ts.do(t, "POST", "/hook", `{}`).expect(t, 504)
	if took := time.Since(start); took < 900*time.Millisecond || took > 5*time.Second {
		t.Fatalf("timed out after %v, want about 1s", took)
	}
	if r.json["status"] != "timed_out" {
		t.Fatalf("body %s", r.body)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CLI did not exit on SIGTERM")
	}
}
