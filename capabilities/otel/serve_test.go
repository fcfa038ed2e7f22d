package otel

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestServeMode: in serve mode a webhook's traceparent header becomes the
// parent of the run span (the HTTP server puts it on the run context),
// the http_request node forwards its own span, and the spans still queued
// are exported when SIGTERM stops the process.
func TestServeMode(t *testing.T) {
	const (
		callerTrace = "0af7651916cd43dd8448eb211c80319c"
		callerSpan  = "b7ad6b7169203331"
	)
	rec, endpoint := collector(t, ProtocolGRPC)
	tg := newTarget(t)
	wf := decode(t, fmt.Sprintf(`
name = "hooked"

[[start_nodes]]
name = "main"
source = "http"
entry_node = "fetch"

[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"

[[nodes]]
id = "fetch"
type = "http_request"
method = "GET"
url_from = "trigger.url"

[policy.http]
urls = [%q]

%s`, tg.URL+"/**", otelBlock(endpoint, ProtocolGRPC, "")))
	var stderr firetest.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- cli.Main([]string{"--bind", "127.0.0.1:0", "--log-format", "json"},
			cli.Options{Prog: "hooked", Workflow: wf, Stdout: &firetest.Buffer{}, Stderr: &stderr, Env: func(string) string { return "" }})
	}()
	addrRE := regexp.MustCompile(`"msg":"http.listening","workflow":"hooked","addr":"([0-9.:]+)"`)
	waitFor(t, func() bool { return addrRE.MatchString(stderr.String()) })
	url := "http://" + addrRE.FindStringSubmatch(stderr.String())[1] + "/hook"

	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"url":"`+tg.URL+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /hook: %s\n%s", resp.Status, stderr.String())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != cli.ExitOK {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve mode did not stop on SIGTERM")
	}
	s := byName(rec.Spans())
	run, fetch := s["hooked"], s["fetch"]
	if run.TraceID != callerTrace || run.ParentSpanID != callerSpan || run.Attrs[AttrTriggerKind] != "http" || run.Attrs[AttrStartNode] != "main" {
		t.Errorf("run span %+v", run)
	}
	if fetch.ParentSpanID != run.SpanID || fetch.TraceID != callerTrace {
		t.Errorf("node span %+v", fetch)
	}
	if got := tg.seen(); len(got) != 1 || got[0] != "00-"+callerTrace+"-"+fetch.SpanID+"-01" {
		t.Errorf("outbound traceparent %q, want the fetch span %s", got, fetch.SpanID)
	}
}
