package http

import (
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestServeThroughCLI runs the real one-shot/serve CLI: serve mode is
// inferred from the routes, --bind and --drain-timeout-secs reach the
// server, SIGTERM drains an in-flight run and the process exits 0.
func TestServeThroughCLI(t *testing.T) {
	t.Setenv("CLI_TOKENS", "cli-secret-token-42")
	g := resetGate()
	wf, err := gen.Decode("workflow.toml", []byte(wf("block", `auth = "bearer:ops"
[auth.bearer.ops]
tokens_env = "CLI_TOKENS"
`)))
	if err != nil {
		t.Fatal(err)
	}
	stderr, stdout := &syncBuffer{}, &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- cli.Main([]string{"--bind", "127.0.0.1:0", "--drain-timeout-secs", "10", "--log-format", "json"},
			cli.Options{Prog: "agent", Workflow: wf, Stdout: stdout, Stderr: stderr})
	}()
	addrRE := regexp.MustCompile(`"msg":"http.listening","workflow":"hooks","addr":"([0-9.:]+)"`)
	waitFor(t, func() bool { return addrRE.MatchString(stderr.String()) })
	ts := &testServer{URL: "http://" + addrRE.FindStringSubmatch(stderr.String())[1]}
	ts.Client = newClient()

	ts.do(t, "GET", "/healthz", "").expect(t, 200)
	ts.do(t, "POST", "/hook", `{}`).expect(t, 401)
	result := make(chan resp, 1)
	go func() {
		req := mustRequest(t, "POST", ts.URL+"/hook", `{"n":1}`)
		req.Header.Set("Authorization", "Bearer cli-secret-token-42")
		r, err := ts.sendErr(req)
		if err != nil {
			r = resp{code: -1, body: err.Error()}
		}
		result <- r
	}()
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "workflow.started") })
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "http.draining") })
	time.Sleep(100 * time.Millisecond)
	close(g)
	(<-result).expect(t, 200)
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("CLI did not exit after the drain")
	}
	if strings.Contains(stderr.String(), "cli-secret-token-42") {
		t.Fatal("token in the log")
	}
}
