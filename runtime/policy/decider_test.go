package policy

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// recorder is a Decider that records what it was asked and denies the
// tools listed in deny.
type recorder struct {
	seen []Request
	deny map[string]bool
}

func (r *recorder) Decide(req Request) error {
	r.seen = append(r.seen, req)
	if r.deny[req.Tool] {
		return errors.New("no")
	}
	return nil
}

// withCompiler installs c as the [policy.rego] compiler for one test.
func withCompiler(t *testing.T, c DeciderCompiler) {
	compilerMu.Lock()
	prev := compiler
	compiler = c
	compilerMu.Unlock()
	t.Cleanup(func() { RegisterRego(prev) })
}

func compileWith(t *testing.T, rec *recorder, p *workflow.Policy) *Policy {
	t.Helper()
	withCompiler(t, func(*workflow.RegoPolicy, map[string][]byte) (Decider, error) { return rec, nil })
	p.Rego = &workflow.RegoPolicy{Inline: "package agent"}
	pol, err := Compile(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestDeciderIsAnAdditionalAnd: the decision is consulted only after the
// static allowlist allows, and its denial is a Denial from source rego.
func TestDeciderIsAnAdditionalAnd(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{deny: map[string]bool{"env.read": true}}
	pol := compileWith(t, rec, &workflow.Policy{
		FS:  &workflow.FSPolicy{Read: []string{dir + "/**"}},
		Env: &workflow.EnvPolicy{ReadKeys: []string{"A"}},
	})
	// Static denial: the decider is never asked.
	if _, err := pol.FSRead("/etc/passwd"); !IsDenial(err) || len(rec.seen) != 0 {
		t.Fatalf("static deny: %v, decider asked %v", err, rec.seen)
	}
	if err := pol.EnvRead("B"); !IsDenial(err) || len(rec.seen) != 0 {
		t.Fatalf("static deny: %v, decider asked %v", err, rec.seen)
	}
	// Static allow, decider allows.
	if _, err := pol.FSRead(dir + "/x"); err != nil {
		t.Fatal(err)
	}
	// Static allow, decider denies.
	err = pol.EnvRead("A")
	var d *Denial
	if !errors.As(err, &d) || d.Source != SourceRego || d.What != "env.read" || d.Target != "A" || !strings.Contains(d.Error(), "no") {
		t.Fatalf("rego deny: %#v", err)
	}
	want := []Request{
		{Tool: "fs.read", Args: map[string]any{"path": dir + "/x"}},
		{Tool: "env.read", Args: map[string]any{"key": "A"}},
	}
	if !reflect.DeepEqual(rec.seen, want) {
		t.Fatalf("decider saw %v, want %v", rec.seen, want)
	}
}

// TestConfirmAsksTheDecider: the check on the object a handler opened
// (FSConfirm, ShellConfirm) takes the [policy.rego] decision again, on the
// real path, so a swap after FSTarget cannot reach what Rego refuses.
func TestConfirmAsksTheDecider(t *testing.T) {
	rec := &recorder{deny: map[string]bool{"fs.write": true, "shell.run": true}}
	pol := compileWith(t, rec, &workflow.Policy{
		FS:    &workflow.FSPolicy{Write: []string{"/d/**"}},
		Shell: &workflow.ShellPolicy{Commands: []string{"/bin/*"}},
	})
	if err := pol.FSConfirm(FSWriteCheck, "/d/real"); !IsDenial(err) {
		t.Fatalf("FSConfirm: %v", err)
	}
	if err := pol.ShellConfirm("/bin/real", "-x"); !IsDenial(err) {
		t.Fatalf("ShellConfirm: %v", err)
	}
	want := []Request{
		{Tool: "fs.write", Args: map[string]any{"path": "/d/real"}},
		{Tool: "shell.run", Args: map[string]any{"command": "/bin/real", "args": []string{"-x"}}},
	}
	if !reflect.DeepEqual(rec.seen, want) {
		t.Fatalf("decider saw %v, want %v", rec.seen, want)
	}
}

// TestRegoFailsClosed: a [policy.rego] that was not prepared denies
// everything, and a binary without the rego family refuses the workflow.
func TestRegoFailsClosed(t *testing.T) {
	p := &workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"*"}}, Rego: &workflow.RegoPolicy{Inline: "package agent"}}
	if err := New(p).EnvRead("A"); !IsDenial(err) || !strings.Contains(err.Error(), "not compiled") {
		t.Fatalf("New with rego: %v", err)
	}
	withCompiler(t, nil)
	if _, err := Compile(p, nil); err == nil || !strings.Contains(err.Error(), "does not link the rego capability family") {
		t.Fatalf("Compile without the family: %v", err)
	}
	withCompiler(t, func(*workflow.RegoPolicy, map[string][]byte) (Decider, error) { return nil, errors.New("bad rego") })
	if _, err := Compile(p, nil); err == nil || err.Error() != "bad rego" {
		t.Fatalf("Compile error: %v", err)
	}
	// Without [policy.rego] nothing changes.
	if pol, err := Compile(&workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"*"}}}, nil); err != nil || pol.EnvRead("A") != nil {
		t.Fatalf("no rego: %v", err)
	}
}

// TestLLMInfer: no static allowlist governs intelligence calls; only the
// decision can deny one.
func TestLLMInfer(t *testing.T) {
	if err := New(nil).LLMInfer("default", ""); err != nil {
		t.Fatal(err)
	}
	if err := New(&workflow.Policy{}).LLMInfer("default", ""); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{deny: map[string]bool{"llm.infer": true}}
	pol := compileWith(t, rec, &workflow.Policy{})
	if err := pol.LLMInfer("fast", "m-1"); !IsDenial(err) {
		t.Fatalf("LLMInfer: %v", err)
	}
	if want := []Request{{Tool: "llm.infer", Args: map[string]any{"backend": "fast", "model": "m-1"}}}; !reflect.DeepEqual(rec.seen, want) {
		t.Fatalf("decider saw %v", rec.seen)
	}
}
