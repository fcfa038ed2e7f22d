//go:build kiln_testhooks

package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/internal/beneath"
	"github.com/kilnworks/kiln/capabilities/internal/beneath/beneathtest"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The tests in this file run the fs family's real nodes with kiln's own
// path checks switched off, so that only Landlock stands between a node
// and a file outside the policy:
//   - the policy's allowlist: the engine holds an allow-all policy, while
//     the ruleset is derived from the workflow's [policy];
//   - the beneath resolution (openat2 RESOLVE_BENEATH, then the check of
//     what was opened): beneath.SwitchChecksOffForTest, which exists only
//     in builds with the kiln_testhooks tag.
// Each scenario also runs once unconfined, as a control: there the same
// accesses must succeed, which proves the checks really were off.

func init() { childModes["nodes"] = nodesChild }

// nodesChild runs spec.Ops through the fs nodes: read_file, write_file
// (content "written"), create_dir. A Target with %d is formatted with
// the attempt number, so every attempt of a Repeat names a new file.
func nodesChild(spec childSpec) int {
	beneath.SwitchChecksOffForTest()
	if !spec.Unconfined {
		rep, err := confine.Apply(spec.Request)
		out, _ := json.Marshal(rep)
		fmt.Printf("REPORT %s\n", out)
		if err != nil {
			fmt.Printf("APPLY_ERROR %s\n", err)
			return 6
		}
	}
	nodes := map[string]workflow.Node{
		"read_file":  {ID: "n", Type: "read_file", PathFrom: "trigger.path"},
		"write_file": {ID: "n", Type: "write_file", PathFrom: "trigger.path", ContentFrom: "trigger.content"},
		"create_dir": {ID: "n", Type: "create_dir", PathFrom: "trigger.path"},
	}
	engine := &runtime.Engine{Policy: policy.New(nil)} // allow-all: no allowlist in the way
	for _, o := range spec.Ops {
		node, ok := nodes[o.Op]
		if !ok {
			fmt.Fprintln(os.Stderr, "unknown node op", o.Op)
			return 99
		}
		p, err := runtime.Compile(&workflow.Workflow{Name: "checks-off", Nodes: []workflow.Node{node}}, runtime.CompileOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "compile:", err)
			return 99
		}
		r := result{Op: o.Op, Target: o.Target}
		if o.Repeat > 0 {
			r.Seen = map[string]int{}
		}
		for i := range max(o.Repeat, 1) {
			target := o.Target
			if strings.Contains(target, "%d") {
				target = fmt.Sprintf(target, i)
			}
			rep := engine.Run(context.Background(), p, runtime.RunOptions{
				Trigger: runtime.MakeTrigger("manual", map[string]any{"path": target, "content": "written"})})
			out := rep.Outcome
			seen := "error"
			if out.Status == runtime.StatusCompleted {
				seen = "ok"
				if o.Op == "read_file" {
					seen, _ = out.FinalValue.(map[string]any)["content"].(string)
				}
			}
			if r.Seen != nil {
				r.Seen[seen]++
				continue
			}
			r.OK = out.Status == runtime.StatusCompleted
			if r.OK && o.Op == "read_file" {
				r.Data = seen
			}
			if out.Err != nil {
				msg, _ := json.Marshal(out)
				r.Err = string(msg)
			}
		}
		out, _ := json.Marshal(r)
		fmt.Printf("RESULT %s\n", out)
	}
	return 0
}

// TestChecksOffLandlockAloneRefuses: with kiln's path checks off, the
// real read_file, write_file and create_dir nodes are refused by the
// kernel outside the policy and work inside it; unconfined, the same
// accesses outside succeed.
func TestChecksOffLandlockAloneRefuses(t *testing.T) {
	abi := requireLandlock(t)
	l := newLayout(t)
	ops := []op{
		{Op: "read_file", Target: l.in + "/file"},
		{Op: "read_file", Target: l.outside + "/secret"},
		{Op: "write_file", Target: l.out + "/new"},
		{Op: "write_file", Target: l.outside + "/new"},
		{Op: "write_file", Target: l.in + "/new"}, // read-only
		{Op: "create_dir", Target: l.out + "/dir"},
		{Op: "create_dir", Target: l.outside + "/dir"},
	}
	run := runChild(t, "nodes", childSpec{Workflow: confinedWorkflow("checks-off", l.policy()), Ops: ops})
	if run.Code != 0 || run.Report == nil || !run.Report.Confined || run.Report.ABI != abi {
		t.Fatalf("child exit %d, report %+v\n%s", run.Code, run.Report, run.Stderr)
	}
	if r := findResult(t, run, "read_file", l.in+"/file"); !r.OK || r.Data != "inside" {
		t.Errorf("read_file inside fs.read: %+v", r)
	}
	if r := findResult(t, run, "write_file", l.out+"/new"); !r.OK {
		t.Errorf("write_file inside fs.write: %+v", r)
	}
	if r := findResult(t, run, "create_dir", l.out+"/dir"); !r.OK {
		t.Errorf("create_dir inside fs.write: %+v", r)
	}
	for _, o := range []op{ops[1], ops[3], ops[4], ops[6]} {
		r := findResult(t, run, o.Op, o.Target)
		// The engine's policy allows everything: a refusal can only be
		// the kernel's (EACCES), not a policy denial.
		if r.OK || !strings.Contains(r.Err, "permission denied") || strings.Contains(r.Err, "policy") {
			t.Errorf("%s %s with the checks off: %+v, want the kernel's permission denied", o.Op, o.Target, r)
		}
	}
	for _, p := range []string{l.outside + "/new", l.in + "/new", l.outside + "/dir"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}

	// The control: unconfined, the checks really are off.
	control := runChild(t, "nodes", childSpec{Workflow: confinedWorkflow("checks-off", l.policy()), Unconfined: true,
		Ops: []op{{Op: "read_file", Target: l.outside + "/secret"}, {Op: "write_file", Target: l.outside + "/control"}}})
	if r := findResult(t, control, "read_file", l.outside+"/secret"); !r.OK || r.Data != "SECRET" {
		t.Errorf("control: read_file outside the policy, unconfined, with the checks off: %+v, want the secret", r)
	}
	if r := findResult(t, control, "write_file", l.outside+"/control"); !r.OK {
		t.Errorf("control: write_file outside the policy, unconfined, with the checks off: %+v", r)
	}
}

// TestChecksOffSymlinkSwapZeroEscapes races the real nodes, with kiln's
// checks off, against a parent that swaps names as fast as it can:
// read_file of a file in fs.read that is swapped with a symlink to a
// secret outside, and write_file into a directory in fs.write that is
// swapped with a symlink to a directory outside. Confined: zero escapes.
// Unconfined (the control): escapes happen, so the race is real.
func TestChecksOffSymlinkSwapZeroEscapes(t *testing.T) {
	requireLandlock(t)
	const reads, writes = 3000, 500
	race := func(unconfined bool) (read map[string]int, escaped, swaps int) {
		l := newLayout(t)
		writeFile(t, l.in+"/target", "inside")
		if err := os.Symlink(l.outside+"/secret", l.in+"/decoy"); err != nil {
			t.Fatal(err)
		}
		outDir := mkdir(t, l.outside+"/dir")
		mkdir(t, l.out+"/sub")
		if err := os.Symlink(outDir, l.out+"/subdecoy"); err != nil {
			t.Fatal(err)
		}
		stopRead := beneathtest.Swap(t, l.in+"/target", l.in+"/decoy")
		stopWrite := beneathtest.Swap(t, l.out+"/sub", l.out+"/subdecoy")
		run := runChild(t, "nodes", childSpec{Workflow: confinedWorkflow("race", l.policy()), Unconfined: unconfined,
			Ops: []op{{Op: "read_file", Target: l.in + "/target", Repeat: reads}, {Op: "write_file", Target: l.out + "/sub/f-%d", Repeat: writes}}})
		swaps = stopRead() + stopWrite()
		if run.Code != 0 || !unconfined && (run.Report == nil || !run.Report.Confined) {
			t.Fatalf("child exit %d, report %+v\n%s", run.Code, run.Report, run.Stderr)
		}
		read = findResult(t, run, "read_file", l.in+"/target").Seen
		written := findResult(t, run, "write_file", l.out+"/sub/f-%d").Seen
		entries, err := os.ReadDir(outDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("unconfined %v: %d swaps; reads %v; writes %v, %d files outside", unconfined, swaps, read, written, len(entries))
		return read, len(entries), swaps
	}

	read, escaped, _ := race(false)
	if read["SECRET"] != 0 {
		t.Errorf("%d of %d reads escaped to the file outside the policy", read["SECRET"], reads)
	}
	if escaped != 0 {
		t.Errorf("%d of %d writes escaped to the directory outside the policy", escaped, writes)
	}
	if read["inside"] == 0 || read["error"] == 0 {
		t.Errorf("the race did not run both ways: %v", read)
	}

	read, escaped, _ = race(true)
	if read["SECRET"] == 0 || escaped == 0 {
		t.Errorf("control: unconfined with the checks off, %d reads and %d writes escaped: the race or the hook did not work", read["SECRET"], escaped)
	}
}

// TestHookOnlyInTestBuilds: this test binary (built with kiln_testhooks)
// carries the hook, which is how TestSealedBinaryHasNoHook knows what to
// look for.
func TestHookOnlyInTestBuilds(t *testing.T) {
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(self), hookSymbol) {
		t.Errorf("this kiln_testhooks build does not carry %s: the absence check would prove nothing", hookSymbol)
	}
}
