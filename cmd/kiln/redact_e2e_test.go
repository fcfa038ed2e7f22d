package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

// statusWF asks a status endpoint (with the secret STATUS_TOKEN as its
// bearer token) for {"state": ...} and switches on the state. The manual
// flow pauses on "up" (so there is a checkpoint) and ends at "healthy";
// the http flow replies with the parsed status.
const statusWF = `
name = "status-check"

[[secrets]]
name = "STATUS_TOKEN"
source = "env"
var = "STATUS_TOKEN"

[policy.http]
urls = ["URL/**"]

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "fetch"

[[start_nodes]]
name = "web"
source = "http"
entry_node = "wfetch"

[[http_routes]]
method = "POST"
path = "/check"
start_node = "web"

[[nodes]]
id = "fetch"
type = "http_request"
method = "GET"
url_from = "trigger.url"
[nodes.headers]
Authorization = "Bearer {{secret:STATUS_TOKEN}}"

[[nodes]]
id = "parse"
type = "parse_json"
input_from = "fetch.body"

[[nodes]]
id = "route"
type = "switch"
expr = "parse.parsed.state"

[[nodes]]
id = "approve"
type = "pause_for_approval"
reason = "confirm"

[[nodes]]
id = "healthy"
type = "terminate"

[[nodes]]
id = "down"
type = "fail"
reason = "service down"

[[nodes]]
id = "wfetch"
type = "http_request"
method = "GET"
url_from = "trigger.url"
[nodes.headers]
Authorization = "Bearer {{secret:STATUS_TOKEN}}"

[[nodes]]
id = "wparse"
type = "parse_json"
input_from = "wfetch.body"

[[nodes]]
id = "wroute"
type = "switch"
expr = "wparse.parsed.state"

[[nodes]]
id = "reply"
type = "respond"
body_template = "{{wparse.parsed}}"

[[edges]]
from = "fetch"
to = "parse"

[[edges]]
from = "parse"
to = "route"

[[edges]]
from = "route"
to = "approve"
when = "up"

[[edges]]
from = "route"
to = "down"
when = "down"

[[edges]]
from = "approve"
to = "healthy"

[[edges]]
from = "wfetch"
to = "wparse"

[[edges]]
from = "wparse"
to = "wroute"

[[edges]]
from = "wroute"
to = "reply"
when = "up"
`

// kilnEnv runs the built kiln with extra environment variables; a run
// that hangs is killed, not left behind.
func kilnEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(builtKiln(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	kill.Stop()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// stringsOf returns every string value of the JSON text b (object keys
// not included), skipping the members named in skip.
func stringsOf(t *testing.T, what string, b []byte, skip ...string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, b)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !slices.Contains(skip, k) {
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case string:
			out = append(out, x)
		}
	}
	walk(v)
	return out
}

// noSecretInStrings fails when a string value of b holds the secret
// outside the [REDACTED] markers.
func noSecretInStrings(t *testing.T, what string, b []byte, secret string, skip ...string) {
	t.Helper()
	for _, s := range stringsOf(t, what, b, skip...) {
		for _, part := range strings.Split(s, runtime.RedactedMarker) {
			if strings.Contains(part, secret) {
				t.Fatalf("%s: string %q holds the secret %q\n%s", what, s, secret, b)
			}
		}
	}
}

// checkStderr: every line is an audit JSON line or the one short-secret
// warning, which names the secret and never holds its value.
func checkStderr(t *testing.T, what, stderr, secret string) {
	t.Helper()
	const warning = "kiln: warning: secret STATUS_TOKEN is shorter than 8 characters; redaction of short values can hide unrelated output"
	warnings, events := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if line == warning {
			warnings++
			continue
		}
		if !json.Valid([]byte(line)) {
			t.Fatalf("%s: stderr line is neither the warning nor audit JSON: %q", what, line)
		}
		// The time stamp is the logger's own, not data.
		noSecretInStrings(t, what+" audit line", []byte(line), secret, "time")
		if strings.Contains(line, `"msg":"secret.short"`) && strings.Contains(line, `"secret":"STATUS_TOKEN"`) {
			events++
		}
	}
	if warnings != 1 || events != 1 {
		t.Fatalf("%s: %d short-secret warnings and %d audit events, want 1 and 1:\n%s", what, warnings, events, stderr)
	}
}

// TestSecretsRedactedOnlyAtSinks: a secret whose value also appears in
// the data ("up", the state the endpoint reports) does not change what
// the switch sees: the "up" branch is taken and the run pauses, resumes
// and completes. Under one-character secrets ("7", which occurs in
// numbers; "q") the outcome JSON, the --record file, the checkpoint and
// the HTTP reply stay valid JSON with their keys and numbers intact, and
// no string in any sink holds the secret.
func TestSecretsRedactedOnlyAtSinks(t *testing.T) {
	for _, secret := range []string{"up", "7", "q"} {
		t.Run(secret, func(t *testing.T) {
			status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+secret {
					http.Error(w, "bad token", http.StatusUnauthorized)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				body, _ := json.Marshal(map[string]any{"state": "up", "echo": r.Header.Get("Authorization"), "n": 17})
				w.Write(body)
			}))
			defer status.Close()
			dir := t.TempDir()
			wfPath := writeWorkflow(t, dir, strings.Replace(statusWF, "URL", status.URL, 1))
			input := filepath.Join(dir, "in.json")
			if err := os.WriteFile(input, []byte(`{"url":"`+status.URL+`/status"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			state, rec1, rec2 := filepath.Join(dir, "state"), filepath.Join(dir, "run1.json"), filepath.Join(dir, "run2.json")
			env := []string{"STATUS_TOKEN=" + secret}
			// Byte-level absence is checked where no key, number or id can
			// hold the secret by chance.
			anywhere := secret != "7"
			sinks := map[string][]byte{}

			// 1. The run takes the "up" branch and pauses.
			out, errOut, code := kilnEnv(t, env, "run", wfPath, "--mode", "once", "--input", input, "--state-dir", state, "--record", rec1, "--log-format", "json")
			if code != cli.ExitPaused {
				t.Fatalf("exit %d, want paused (%d): the switch did not take branch up\nstdout %s\nstderr %s", code, cli.ExitPaused, out, errOut)
			}
			checkStderr(t, "first run", errOut, secret)
			var paused map[string]any
			if err := json.Unmarshal([]byte(out), &paused); err != nil || paused["status"] != "paused" || paused["last_node"] != "approve" {
				t.Fatalf("paused outcome %v: %s", err, out)
			}
			sinks["outcome"], sinks["stderr"] = []byte(out), []byte(errOut)
			noSecretInStrings(t, "paused outcome", []byte(out), secret)

			record, err := os.ReadFile(rec1)
			if err != nil {
				t.Fatal(err)
			}
			sinks["record"] = record
			noSecretInStrings(t, "record", record, secret)
			var rec struct {
				Workflow    string `json:"workflow"`
				StartNode   string `json:"start_node"`
				ExecutionID string `json:"execution_id"`
				Status      string `json:"status"`
				LastNode    string `json:"last_node"`
				Detail      json.RawMessage
				WallMS      json.Number `json:"wall_ms"`
				Cost        map[string]json.Number
				Trace       struct {
					Entries []struct {
						NodeID string `json:"node_id"`
						Output map[string]any
					}
				}
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(record, &top); err != nil {
				t.Fatalf("record is not JSON: %v\n%s", err, record)
			}
			if keys := strings.Join(runtime.SortedKeys(top), ","); keys != "attempts,cost,detail,execution_id,interactions,last_node,start_node,started_at,status,tape,trace,trigger,wall_ms,workflow,workflow_digest" { // the record is a tape (docs/replay.md)
				t.Fatalf("record keys changed: %s", keys)
			}
			dec := json.NewDecoder(bytes.NewReader(record))
			dec.UseNumber()
			if err := dec.Decode(&rec); err != nil {
				t.Fatalf("record numbers changed: %v\n%s", err, record)
			}
			if _, err := rec.WallMS.Int64(); err != nil {
				t.Fatalf("wall_ms %q", rec.WallMS)
			}
			if rec.Status != "paused" || rec.LastNode != "approve" || rec.Cost["node_executions"] != "4" || len(rec.Trace.Entries) != 4 {
				t.Fatalf("record: %s", record)
			}
			parsed, _ := rec.Trace.Entries[1].Output["parsed"].(map[string]any)
			if parsed["n"] != json.Number("17") || len(parsed) != 3 {
				t.Fatalf("parse output in the record: %v", rec.Trace.Entries[1].Output)
			}

			// 2. The checkpoint: valid, data redacted, resumable.
			files, _ := filepath.Glob(filepath.Join(state, "runs", "*.json"))
			if len(files) != 1 {
				t.Fatalf("checkpoints %v", files)
			}
			cpData, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			sinks["checkpoint"] = cpData
			var cp map[string]any
			dec = json.NewDecoder(bytes.NewReader(cpData))
			dec.UseNumber()
			if err := dec.Decode(&cp); err != nil {
				t.Fatalf("checkpoint is not JSON: %v\n%s", err, cpData)
			}
			for _, data := range []string{"trigger", "outputs", "reason"} {
				b, _ := json.Marshal(cp[data])
				noSecretInStrings(t, "checkpoint "+data, b, secret)
			}
			if n := cp["outputs"].(map[string]any)["parse"].(map[string]any)["parsed"].(map[string]any)["n"]; n != json.Number("17") {
				t.Fatalf("number in the checkpoint: %v", n)
			}
			runID := strings.TrimSuffix(filepath.Base(files[0]), ".json")
			out, errOut, code = kilnEnv(t, env, "run", wfPath, "--mode", "once", "--resume", runID, "--state-dir", state, "--record", rec2, "--log-format", "json")
			if code != cli.ExitOK {
				t.Fatalf("resume exit %d\nstdout %s\nstderr %s", code, out, errOut)
			}
			var done map[string]any
			if err := json.Unmarshal([]byte(out), &done); err != nil || done["status"] != "completed" || done["last_node"] != "healthy" {
				t.Fatalf("resumed outcome %v: %s", err, out)
			}
			checkStderr(t, "resume", errOut, secret)
			sinks["resumed outcome"], sinks["resume stderr"] = []byte(out), []byte(errOut)
			if sinks["record 2"], err = os.ReadFile(rec2); err != nil || !json.Valid(sinks["record 2"]) {
				t.Fatalf("resumed record %v: %s", err, sinks["record 2"])
			}

			// 3. The HTTP reply of a route replying with the parsed status.
			reply, errOut := serveOnce(t, wfPath, env, `{"url":"`+status.URL+`/status"}`)
			sinks["reply"], sinks["serve stderr"] = reply, []byte(errOut)
			var r map[string]any
			dec = json.NewDecoder(bytes.NewReader(reply))
			dec.UseNumber()
			if err := dec.Decode(&r); err != nil || r["n"] != json.Number("17") || len(r) != 3 {
				t.Fatalf("reply %v: %s", err, reply)
			}
			noSecretInStrings(t, "reply", reply, secret)
			checkStderr(t, "serve", errOut, secret)

			if anywhere {
				for what, b := range sinks {
					if what == "record" {
						continue // a tape: its own keys ("seq", "request") hold a "q"; every string is checked above
					}
					if bytes.Contains(b, []byte(secret)) {
						t.Fatalf("secret %q in the %s:\n%s", secret, what, b)
					}
				}
			}
		})
	}
}

// serveOnce starts the workflow in serve mode on a free loopback port,
// posts body to /check, stops the process with SIGTERM and returns the
// reply body and the process's stderr.
func serveOnce(t *testing.T, wfPath string, env []string, body string) ([]byte, string) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(builtKiln(t), "run", wfPath, "--mode", "serve", "--bind", addr, "--log-format", "json", "--drain-timeout-secs", "5")
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderr strings.Builder
	listening := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), `"msg":"http.listening"`) {
				once.Do(func() { close(listening) })
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan error, 1)
		go func() { <-copied; waited <- cmd.Wait() }()
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
			t.Error("serve process did not stop on SIGTERM")
		}
	}
	defer stop()
	select {
	case <-listening:
	case <-copied:
		t.Fatalf("serve process ended:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve process did not listen")
	}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	res, err := client.Post("http://"+addr+"/check", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("reply %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), reply)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	return reply, stderr.String()
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
