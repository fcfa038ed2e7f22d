package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/kilnworks/kiln/runtime/workflow"

	"github.com/kilnworks/kiln/gen"

	// The families the CLI children's workflows use (capabilities/all
	// would import this package).
	_ "github.com/kilnworks/kiln/capabilities/compose"
	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/cron"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/env"
	_ "github.com/kilnworks/kiln/capabilities/event"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	_ "github.com/kilnworks/kiln/capabilities/fswatch"
	_ "github.com/kilnworks/kiln/capabilities/http"
	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/interval"
	_ "github.com/kilnworks/kiln/capabilities/mcp"
	_ "github.com/kilnworks/kiln/capabilities/secrets"
	_ "github.com/kilnworks/kiln/capabilities/shell"
)

// Confinement cannot be lifted, so every test that applies it runs in a
// child: this test binary, re-executed with childEnv naming what to do.
const (
	childEnv      = "KILN_SANDBOX_TEST_CHILD"
	childSpecEnv  = "KILN_SANDBOX_TEST_SPEC"
	noLandlockEnv = "KILN_SANDBOX_TEST_NO_LANDLOCK"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ticketsArg {
		os.Exit(serveTickets()) // mcp-reconcile's stand-in MCP server (examples_test.go)
	}
	if mode := os.Getenv(childEnv); mode != "" {
		confine.AllowInTest = true
		if os.Getenv(noLandlockEnv) == "1" {
			detectABI = func() int { return 0 } // a kernel without Landlock
		}
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// childSpec is what a child does.
type childSpec struct {
	Workflow *workflow.Workflow
	Request  confine.Request // its Workflow is Workflow
	Args     []string        // mode cli: the CLI's arguments
	Build    bool            // mode cli: pass a Build, so preflight runs
	Ops      []op            // mode probe: what to try once confined
	// Example (mode cli): load this workflow file instead of Workflow;
	// Confine adds [sandbox] to it.
	Example string
	Confine bool
	// Unconfined (mode nodes): skip confine.Apply, the control run that
	// shows what happens without Landlock.
	Unconfined bool
}

// childModes are the child modes that other test files add (mode nodes,
// in test builds with the kiln_testhooks tag).
var childModes = map[string]func(childSpec) int{}

// op is one access a probe child tries after confinement, with kiln's
// own checks out of the way: plain system calls.
type op struct {
	Op     string // read, write, connect, bind, read_thread
	Target string // a path, or a loopback host:port
	// Repeat tries the op this many times and reports how often each
	// content was seen (the race tests).
	Repeat int
}

// result is a probe's finding.
type result struct {
	Op, Target string
	OK         bool
	Err        string
	Data       string         // what a read returned
	Seen       map[string]int // Repeat: contents read, and "error" for failures
}

func child(mode string) int {
	data, err := os.ReadFile(os.Getenv(childSpecEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 99
	}
	var spec childSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 99
	}
	if spec.Example != "" {
		wf, err := gen.Load(spec.Example, gen.LoadOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			return 99
		}
		if spec.Confine {
			wf.Sandbox = &workflow.Sandbox{Landlock: "best_effort"}
		}
		spec.Workflow = wf
	}
	spec.Request.Workflow = spec.Workflow
	switch mode {
	case "cli":
		o := cli.Options{Prog: "kiln-test", Workflow: spec.Workflow}
		if spec.Build {
			o.Build = &cli.Build{Needs: &needs.Effective{Workflow: spec.Workflow.Name, Needs: []needs.Need{}}}
		}
		return cli.Main(spec.Args, o)
	case "probe":
		return probe(spec)
	}
	if run := childModes[mode]; run != nil {
		return run(spec)
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 99
}

func probe(spec childSpec) int {
	// A goroutine on its own OS thread, started before confinement: the
	// ruleset must bind it too (go-landlock restricts every thread).
	threadOp := make(chan string)
	threadRes := make(chan error)
	go func() {
		runtime.LockOSThread()
		for path := range threadOp {
			_, err := os.ReadFile(path)
			threadRes <- err
		}
	}()

	start := time.Now()
	rep, err := confine.Apply(spec.Request)
	fmt.Printf("APPLY_NS %d\n", time.Since(start).Nanoseconds())
	out, _ := json.Marshal(rep)
	fmt.Printf("REPORT %s\n", out)
	if err != nil {
		fmt.Printf("APPLY_ERROR %s\n", err)
		return 6
	}
	for _, o := range spec.Ops {
		r := result{Op: o.Op, Target: o.Target}
		var err error
		switch o.Op {
		case "read":
			if o.Repeat > 0 {
				r.Seen = map[string]int{}
				for range o.Repeat {
					b, err := os.ReadFile(o.Target)
					if err != nil {
						r.Seen["error"]++
						continue
					}
					r.Seen[string(b)]++
				}
				break
			}
			var b []byte
			b, err = os.ReadFile(o.Target)
			r.Data = string(b)
		case "write":
			if o.Repeat > 0 {
				r.Seen = map[string]int{}
				for range o.Repeat {
					f, err := os.OpenFile(o.Target, os.O_WRONLY|os.O_APPEND, 0)
					if err != nil {
						r.Seen["error"]++
						continue
					}
					_, err = f.WriteString("x")
					f.Close()
					if err != nil {
						r.Seen["error"]++
					} else {
						r.Seen["written"]++
					}
				}
				break
			}
			err = os.WriteFile(o.Target, []byte("written by the probe\n"), 0o600)
		case "connect":
			var c net.Conn
			c, err = net.DialTimeout("tcp", o.Target, 5*time.Second)
			if err == nil {
				c.Close()
			}
		case "bind":
			// Plain TCP: Go listens with Multipath TCP by default, which
			// Landlock does not restrict (docs/sandbox.md).
			var lc net.ListenConfig
			lc.SetMultipathTCP(false)
			var l net.Listener
			l, err = lc.Listen(context.Background(), "tcp", o.Target)
			if err == nil {
				l.Close()
			}
		case "read_thread":
			threadOp <- o.Target
			err = <-threadRes
		default:
			err = errors.New("unknown op")
		}
		r.OK = err == nil
		if err != nil {
			r.Err = err.Error()
		}
		out, _ := json.Marshal(r)
		fmt.Printf("RESULT %s\n", out)
	}
	return 0
}

// requireLandlock skips a test on a kernel without Landlock, loudly, and
// fails it under CI=true: CI runs on machines like this one, which have
// Landlock, so a skip there would hide a broken confinement.
func requireLandlock(t *testing.T) int {
	t.Helper()
	abi := kernelABI()
	if abi == 0 {
		testtool.Missing(t, "this kernel has no usable Landlock: the confinement tests cannot run")
	}
	return abi
}

// childRun is a finished child.
type childRun struct {
	Code           int
	Stdout, Stderr string
	Report         *confine.Report
	Results        []result
	ApplyNS        int64 // probe: how long confine.Apply took
}

// runChild runs this test binary as a child in mode with spec and extra
// environment, and waits (at most a minute) for it.
func runChild(t *testing.T, mode string, spec childSpec, env ...string) childRun {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/spec.json"
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childSpecEnv+"="+path, "TMPDIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	run := childRun{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		run.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(run.Stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "REPORT "); ok {
			if err := json.Unmarshal([]byte(s), &run.Report); err != nil {
				t.Fatalf("report %s: %v", s, err)
			}
		}
		if s, ok := strings.CutPrefix(line, "APPLY_NS "); ok {
			run.ApplyNS, _ = strconv.ParseInt(s, 10, 64)
		}
		if s, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r result
			if err := json.Unmarshal([]byte(s), &r); err != nil {
				t.Fatalf("result %s: %v", s, err)
			}
			run.Results = append(run.Results, r)
		}
	}
	return run
}

// loopbackListener listens on 127.0.0.1 and accepts until the test ends;
// it returns the port.
func loopbackListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
