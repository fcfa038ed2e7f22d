package pgstate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/capabilities/interval"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// A replica is this test binary re-executed as one server of the fleet:
// the http family's server on a loopback port, its keyed route's claims,
// its async route's run records and checkpoints in the shared database.
const (
	replicaEnv      = "KILN_PGSTATE_REPLICA_DSN"
	replicaLogEnv   = "KILN_PGSTATE_RUN_LOG"    // every run appends a line here
	replicaBlockEnv = "KILN_PGSTATE_BLOCK"      // "1": runs block until cancelled
	replicaLeaseEnv = "KILN_PGSTATE_LEASE_MS"   // the claim lease
	replicaIDEnv    = "KILN_PGSTATE_REPLICA_ID" // written in the run log
	replicaTicksEnv = "KILN_PGSTATE_TICKS"      // "1": serve the interval trigger too
)

const replicaWorkflow = `
name = "fleet"
[[start_nodes]]
name = "main"
source = "http"
entry_node = "n"
[[nodes]]
id = "n"
type = "pgstatetest_node"
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
idempotency_key = "trigger.id"
[[http_routes]]
method = "POST"
path = "/async"
start_node = "main"
reply = "async"
`

// nodeDelay is how long a run takes (0 in the throughput figures).
var nodeDelay = 20 * time.Millisecond

func init() {
	// The replicas serve a keyed and an async route, which a generated
	// program links only when its workflow declares them.
	http.EnableAsync()
	http.EnableIdempotency()
	runtime.RegisterNode(runtime.NodeKind{Kind: "pgstatetest_node", Family: "pgstatetest",
		Prepare: func(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				if slot, ok := c.Run.Trigger()["slot_unix_ms"]; ok { // an interval tick
					appendLine(fmt.Sprint("tick ", slot, " ", os.Getenv(replicaIDEnv)))
					return runtime.Next(nil), nil
				}
				id, _ := c.Run.Trigger()["id"].(string)
				if os.Getenv(replicaBlockEnv) == "1" {
					appendLine("start " + id)
					<-ctx.Done()
					return runtime.Result{}, ctx.Err()
				}
				time.Sleep(nodeDelay) // long enough for duplicates to meet it in flight
				appendLine("run " + id + " " + os.Getenv(replicaIDEnv))
				return runtime.Next(map[string]any{"id": id}), nil
			}, nil
		}})
}

// appendLine writes one line with one O_APPEND write: lines from
// concurrent replicas never interleave.
func appendLine(s string) {
	f, err := os.OpenFile(os.Getenv(replicaLogEnv), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s + "\n"); err != nil {
		panic(err)
	}
}

// replicaMain serves until its stdin closes (or it is killed).
func replicaMain() {
	if err := serveReplica(); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveReplica() error {
	lease, _ := strconv.Atoi(os.Getenv(replicaLeaseEnv))
	store, err := Open(context.Background(), Config{DSN: os.Getenv(replicaEnv), Lease: time.Duration(lease) * time.Millisecond, MaxConns: 8})
	if err != nil {
		return err
	}
	defer store.Close()
	wf, err := gen.Decode("workflow.toml", []byte(replicaWorkflow))
	if err != nil {
		return err
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		return err
	}
	h := &runtime.Host{Program: p, Engine: &runtime.Engine{Services: &runtime.Services{}}}
	runtime.SetClaimStore(h.Engine.Services, store)
	runtime.SetCheckpointStore(h.Engine.Services, store)
	runtime.SetRunStore(h.Engine.Services, store)
	s, err := http.New(h, http.Config{RunTimeout: 60 * time.Second, DrainTimeout: time.Second})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if os.Getenv(replicaTicksEnv) == "1" {
		runtime.SetTickClaims(h.Engine.Services, store)
		l, err := interval.NewListener(h, 0, workflow.Trigger{Type: "interval", Every: "1s", StartNode: "main"}, nil)
		if err != nil {
			return err
		}
		go func() { _ = l.Serve(ctx) }()
	}
	fmt.Printf("listening %s\n", ln.Addr())
	return s.ServeListener(ctx, ln)
}

// replica is a running replica process.
type replica struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	URL   string
}

func startReplica(t *testing.T, dsn, runLog, id string, lease time.Duration, block bool, env ...string) *replica {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), replicaEnv+"="+dsn, replicaLogEnv+"="+runLog, replicaIDEnv+"="+id,
		replicaLeaseEnv+"="+strconv.FormatInt(lease.Milliseconds(), 10), replicaBlockEnv+"="+map[bool]string{true: "1"}[block])
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{cmd: cmd, stdin: stdin}
	t.Cleanup(r.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("replica %s did not start: %q %v", id, line, err)
	}
	r.URL = "http://" + addr
	return r
}

// stop ends the replica gracefully (stdin closed), or it is already dead.
func (r *replica) stop() {
	if r.stdin != nil {
		r.stdin.Close()
		done := make(chan struct{})
		go func() { _ = r.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = r.cmd.Process.Kill()
			<-done
		}
		r.stdin = nil
	}
}

// kill SIGKILLs the replica: no drain, no release, no goodbye.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.stdin = nil
}

func readRunLog(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
