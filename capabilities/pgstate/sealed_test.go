package pgstate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/pgstate/pgtest"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// sealedDSNEnv is the variable the sealed fleet binary reads its
// connection string from ([state] dsn_env).
const sealedDSNEnv = "KILN_TEST_STATE_DSN"

// sealedWorkflow is one agent with everything a fleet shares: a keyed
// route whose runs pause for approval (hook), an interval trigger every
// second (beat) and a manual three-step run that checkpoints (slow). Its
// shell steps append "WORDS PID" to a log, PID being the replica that ran
// the step. socket is the test cluster's socket directory: [state]
// host must name it.
func sealedWorkflow(socket, dir string) string {
	return fmt.Sprintf(`name = "sealed-fleet"

[state]
backend = "postgres"
host = %[1]q
dsn_env = %[3]q
lease_secs = 3

[[start_nodes]]
name = "hook"
source = "http"
entry_node = "note"

[[start_nodes]]
name = "beat"
source = "event"
entry_node = "tick_args"

[[start_nodes]]
name = "slow"
source = "manual"
entry_node = "s1"

[[http_routes]]
method = "POST"
path = "/hook"
start_node = "hook"
idempotency_key = "trigger.id"

[[triggers]]
type = "interval"
every = "1s"
start_node = "beat"

[[nodes]]
id = "note"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.note"

[[nodes]]
id = "gate"
type = "pause_for_approval"
reason = "approve the hook"

[[nodes]]
id = "after"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.after"

[[nodes]]
id = "tick_args"
type = "template_render"
template = '["%[2]s/log.sh", "tick {{trigger.slot_unix_ms}}"]'

[[nodes]]
id = "tick_list"
type = "parse_json"
input_from = "tick_args.rendered"

[[nodes]]
id = "tick"
type = "shell_run"
command = "/bin/sh"
args_from = "tick_list.parsed"

[[nodes]]
id = "s1"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.s1"

[[nodes]]
id = "s2"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.s2"
timeout_secs = 120

[[nodes]]
id = "s3"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.s3"

[[edges]]
from = "note"
to = "gate"

[[edges]]
from = "gate"
to = "after"

[[edges]]
from = "tick_args"
to = "tick_list"

[[edges]]
from = "tick_list"
to = "tick"

[[edges]]
from = "s1"
to = "s2"

[[edges]]
from = "s2"
to = "s3"
`, socket, dir, sealedDSNEnv)
}

// sealedFleet is the sealed binary and the files its steps use.
type sealedFleet struct {
	bin, dir, log string
}

// TestSealedFleet builds one sealed binary with kiln's generator and runs
// several replica processes of it against one database: `state migrate`
// then replicas with --state-migrate=manual, one fire per interval tick,
// a run paused on one replica resumed on another, and a SIGKILLed
// replica's run completed once by another after its lease.
func TestSealedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a sealed binary")
	}
	cluster := pgtest.Running(t)
	dir := t.TempDir()
	f := &sealedFleet{dir: dir, log: filepath.Join(dir, "steps.log"), bin: filepath.Join(dir, "bin", "sealed-fleet")}
	writeScript(t, filepath.Join(dir, "log.sh"), replicaPID+`echo "$1 $replica" >> `+strconv.Quote(f.log)+"\n")
	src := filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(src, []byte(sealedWorkflow(cluster.Dir, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	res, err := gen.Build(context.Background(), gen.BuildOptions{Workflow: src, Output: f.bin, KilnSource: testtool.RepoRoot(t),
		Plan: gen.PlanOptions{KilnVersion: "v0.0.0-pgstatetest"}})
	if err != nil {
		t.Fatalf("kiln build: %v", err)
	}
	if !slices.Contains(res.Plan.Families, "pgstate") {
		t.Fatalf("families %v: the sealed binary does not link pgstate", res.Plan.Families)
	}
	t.Logf("sealed binary built in %v", time.Since(started).Round(time.Second))

	t.Run("MigrateThenManualStart", f.testMigrate)
	t.Run("EachTickOnce", f.testTicks)
	t.Run("PauseHereResumeThere", f.testPauseResume)
	t.Run("KilledReplicasRunResumedOnce", f.testCrash)
}

// replicaPID sets $replica in a step's script to the pid of the replica
// that runs it: the parent of its parent, the shell family's supervisor
// (field 4 of /proc/PID/stat; the supervisor's name has no space).
const replicaPID = "read -r _ _ _ replica _ < /proc/$PPID/stat\n"

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
}

// migrated returns a fresh database that `BIN state migrate` migrated.
func (f *sealedFleet) migrated(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	out, errOut, code := f.run(t, dsn, "state", "migrate")
	if code != 0 || !strings.Contains(out, "schema at version") {
		t.Fatalf("state migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	return dsn
}

// run runs the binary to its end: stdout, stderr and the exit code.
func (f *sealedFleet) run(t *testing.T, dsn string, args ...string) (string, string, int) {
	t.Helper()
	cmd := f.command(dsn, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%v did not end within 2 minutes\n%s", args, stderr.String())
	}
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func (f *sealedFleet) command(dsn string, args ...string) *exec.Cmd {
	cmd := exec.Command(f.bin, args...)
	cmd.Env = append(os.Environ(), sealedDSNEnv+"="+dsn, "KILN_BIND=")
	cmd.Dir = f.dir
	// Its own process group: a kill reaches its steps' children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// sealedReplica is one serving process of the binary.
type sealedReplica struct {
	cmd  *exec.Cmd
	URL  string
	done chan struct{}
}

// serve starts a serving replica on a loopback port and waits for its
// listener (read from its JSON audit log).
func (f *sealedFleet) serve(t *testing.T, dsn string, args ...string) *sealedReplica {
	t.Helper()
	cmd := f.command(dsn, append([]string{"serve", "--bind", "127.0.0.1:0", "--log-format", "json", "--log-level", "info"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &sealedReplica{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	var tail []string // the last lines, should it fail to start
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "http.listening" {
				a, _ := line["addr"].(string)
				addr <- a
			}
			mu.Lock()
			tail = append(tail, sc.Text())
			if len(tail) > 20 {
				tail = tail[1:]
			}
			mu.Unlock()
		}
		_ = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(r.stop)
	select {
	case a := <-addr:
		r.URL = "http://" + a
	case <-r.done:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("replica exited before listening:\n%s", strings.Join(tail, "\n"))
	case <-time.After(time.Minute):
		t.Fatal("replica not listening within a minute")
	}
	return r
}

// stop ends the replica with SIGTERM (it drains), SIGKILL after 30 s.
func (r *sealedReplica) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
}

// steps reads the step log: one "WORDS... PID" line per step run.
func (f *sealedFleet) steps(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, line := range readRunLog(t, f.log) {
		if line != "" {
			out = append(out, strings.Fields(line))
		}
	}
	return out
}

func (f *sealedFleet) count(t *testing.T, words ...string) (n int, pids []string) {
	for _, s := range f.steps(t) {
		if len(s) == len(words)+1 && slices.Equal(s[:len(words)], words) {
			n++
			pids = append(pids, s[len(words)])
		}
	}
	return n, pids
}

// testMigrate: `state migrate` applies the schema and prints its version;
// a replica with --state-migrate=manual refuses an unmigrated database,
// naming the command, and starts on a migrated one.
func (f *sealedFleet) testMigrate(t *testing.T) {
	_, errOut, code := f.run(t, pgtest.NewDatabase(t), "serve", "--bind", "127.0.0.1:0", "--state-migrate=manual", "--quiet")
	if code == 0 || !strings.Contains(errOut, "state migrate") {
		t.Fatalf("manual start on an unmigrated database: exit %d\n%s", code, errOut)
	}
	dsn := f.migrated(t)
	out, _, code := f.run(t, dsn, "state", "migrate")
	if all, _ := migrations(); code != 0 || !strings.Contains(out, fmt.Sprintf("schema at version %d (was %d)", len(all), len(all))) {
		t.Fatalf("state migrate again: exit %d %s", code, out)
	}
	f.serve(t, dsn, "--state-migrate=manual").stop()
	_, help, _ := f.run(t, dsn, "-h")
	if !strings.Contains(help, "state migrate") {
		t.Fatalf("-h does not list state migrate:\n%s", help)
	}
}

// testTicks: three replicas with an interval trigger every second, for at
// least ten ticks: each tick fires on exactly one replica.
func (f *sealedFleet) testTicks(t *testing.T) {
	dsn := f.migrated(t)
	var fleet []*sealedReplica
	for range 3 {
		fleet = append(fleet, f.serve(t, dsn, "--state-migrate=manual"))
	}
	ticks := func() map[string][]string {
		by := map[string][]string{}
		for _, s := range f.steps(t) {
			if len(s) == 3 && s[0] == "tick" {
				by[s[1]] = append(by[s[1]], s[2])
			}
		}
		return by
	}
	waitFor(t, 2*time.Minute, "ten ticks", func() bool { return len(ticks()) >= 11 })
	for _, r := range fleet {
		r.stop()
	}
	by := ticks()
	var slots []int64
	replicas := map[string]bool{}
	for slot, pids := range by {
		if len(pids) != 1 {
			t.Errorf("tick %s fired %d times in the fleet (by %v)", slot, len(pids), pids)
		}
		n, err := strconv.ParseInt(slot, 10, 64)
		if err != nil {
			t.Fatalf("tick slot %q", slot)
		}
		slots = append(slots, n)
		replicas[pids[0]] = true
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	span := (slots[len(slots)-1]-slots[0])/1000 + 1
	t.Logf("%d ticks over %d one-second slots, each fired once, by %d replicas", len(slots), span, len(replicas))
}

// testPauseResume: a run paused on replica A (the route answers 202 with
// its run id) is listed and resumed by another process of the binary
// (B): the step after the pause runs once, in B; a second resume finds
// nothing to resume.
func (f *sealedFleet) testPauseResume(t *testing.T) {
	dsn := f.migrated(t)
	a := f.serve(t, dsn)
	logSh := filepath.Join(f.dir, "log.sh")
	body, _ := json.Marshal(map[string]any{"id": "p1", "note": []string{logSh, "note p1"}, "after": []string{logSh, "after p1"}})
	resp, err := http.Post(a.URL+"/hook", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var paused struct {
		Status string `json:"status"`
		RunID  string `json:"run_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(reply, &paused) != nil || paused.Status != "paused" || paused.RunID == "" {
		t.Fatalf("POST /hook on A: %d %s", resp.StatusCode, reply)
	}
	_, notePIDs := f.count(t, "note", "p1")

	list, errOut, code := f.run(t, dsn, "--list-checkpoints", "--quiet")
	var entries []map[string]any
	if code != 0 || json.Unmarshal([]byte(list), &entries) != nil || len(entries) != 1 ||
		entries[0]["run_id"] != paused.RunID || entries[0]["state"] != "paused" || entries[0]["resumable"] != true {
		t.Fatalf("list on B: exit %d %s %s", code, list, errOut)
	}
	out, errOut, code := f.run(t, dsn, "--resume", paused.RunID, "--quiet")
	if code != 0 || !strings.Contains(out, `"completed"`) {
		t.Fatalf("resume on B: exit %d\n%s\n%s", code, out, errOut)
	}
	n, afterPIDs := f.count(t, "after", "p1")
	if n != 1 || len(notePIDs) != 1 || afterPIDs[0] == notePIDs[0] {
		t.Fatalf("after the pause ran %d times (by %v), the note by %v: want once, on another process", n, afterPIDs, notePIDs)
	}
	_, errOut, code = f.run(t, dsn, "--resume", paused.RunID, "--quiet")
	if code == 0 || !strings.Contains(errOut, "no checkpoint") {
		t.Fatalf("a second resume: exit %d %s", code, errOut)
	}
	a.stop()
}

// testCrash: replica A runs the three-step run with a checkpoint after
// each node and is SIGKILLed in step two. While A lived, another process
// was refused its run; after A's lease, two processes started together
// with --resume-incomplete, again and again until the run is done, resume
// it exactly once between them: step three runs once.
func (f *sealedFleet) testCrash(t *testing.T) {
	dsn := f.migrated(t)
	marker, pidFile := filepath.Join(f.dir, "s2.marker"), filepath.Join(f.dir, "s2.pid")
	s2 := filepath.Join(f.dir, "s2.sh")
	writeScript(t, s2, replicaPID+fmt.Sprintf(`echo "s2 $replica" >> %[1]q
if [ ! -f %[2]q ]; then touch %[2]q; echo $$ > %[3]q.tmp; mv %[3]q.tmp %[3]q; exec sleep 120; fi
`, f.log, marker, pidFile))
	logSh := filepath.Join(f.dir, "log.sh")
	input, _ := json.Marshal(map[string]any{"s1": []string{logSh, "s1"}, "s2": []string{s2}, "s3": []string{logSh, "s3"}})
	inputPath := filepath.Join(f.dir, "slow.json")
	if err := os.WriteFile(inputPath, input, 0o600); err != nil {
		t.Fatal(err)
	}

	a := f.command(dsn, "once", "--start", "slow", "--input", inputPath, "--checkpoint-each-node", "--quiet")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan struct{})
	go func() { _ = a.Wait(); close(aDone) }()
	killA := func() {
		_ = syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
		<-aDone
	}
	t.Cleanup(killA)
	var sleeper int
	t.Cleanup(func() {
		if sleeper > 0 {
			_ = syscall.Kill(sleeper, syscall.SIGKILL)
		}
	})
	waitFor(t, time.Minute, "step two", func() bool {
		data, err := os.ReadFile(pidFile)
		sleeper, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && sleeper > 0
	})

	list, errOut, code := f.run(t, dsn, "--list-checkpoints", "--quiet")
	var entries []map[string]any
	if code != 0 || json.Unmarshal([]byte(list), &entries) != nil || len(entries) != 1 ||
		entries[0]["active"] != true || entries[0]["next_node"] != "s2" || entries[0]["state"] != "incomplete" {
		t.Fatalf("list while A runs: exit %d %s %s", code, list, errOut)
	}
	runID, _ := entries[0]["run_id"].(string)
	if _, errOut, code := f.run(t, dsn, "--resume", runID, "--quiet"); code == 0 || !strings.Contains(errOut, "executing in another process") {
		t.Fatalf("resuming a run its live owner executes: exit %d %s", code, errOut)
	}

	killA() // SIGKILL, the whole group: no release, no goodbye
	_ = syscall.Kill(sleeper, syscall.SIGKILL)
	killed := time.Now()

	// Two processes at once, until one has resumed it; before the lease
	// ends both find it active and leave it.
	type result struct {
		RunID   string          `json:"run_id"`
		Outcome json.RawMessage `json:"outcome"`
		Skipped string          `json:"skipped"`
	}
	var outcomes []string
	var pickedUp time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for len(outcomes) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the killed replica's run was never resumed")
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 2 {
			wg.Go(func() {
				out, errOut, code := f.run(t, dsn, "--resume-incomplete", "--quiet")
				var rs []result
				if code != 0 || json.Unmarshal([]byte(out), &rs) != nil {
					t.Errorf("--resume-incomplete: exit %d\n%s\n%s", code, out, errOut)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, r := range rs {
					if r.RunID == runID && r.Outcome != nil {
						outcomes = append(outcomes, string(r.Outcome))
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if len(outcomes) > 0 {
			pickedUp = time.Since(killed)
		} else {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if len(outcomes) != 1 || !strings.Contains(outcomes[0], `"completed"`) {
		t.Fatalf("resumed %d times: %v", len(outcomes), outcomes)
	}
	n3, s3PIDs := f.count(t, "s3")
	n2, s2PIDs := f.count(t, "s2")
	if n3 != 1 || n2 != 2 || s3PIDs[0] == s2PIDs[0] || s2PIDs[1] != s3PIDs[0] {
		t.Fatalf("step two ran %d times (by %v), step three %d times (by %v): want two then once, resumed by another process", n2, s2PIDs, n3, s3PIDs)
	}
	if n, _ := f.count(t, "s1"); n != 1 {
		t.Fatalf("step one ran %d times, want once (the run resumes at the node it had not finished)", n)
	}
	if list, _, _ := f.run(t, dsn, "--list-checkpoints", "--quiet"); strings.TrimSpace(list) != "[]" {
		t.Fatalf("checkpoints left: %s", list)
	}
	t.Logf("the killed replica's run was resumed and completed %v after the kill (lease 3 s)", pickedUp.Round(10*time.Millisecond))
}
