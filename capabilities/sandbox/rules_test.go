package sandbox

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestURLPorts: a URL pattern bounds the TCP port only when its authority
// is complete.
func TestURLPorts(t *testing.T) {
	for _, c := range []struct {
		url  string
		port uint16 // 0: unbounded
	}{
		{"https://api.example.com/*", 443},
		{"http://api.example.com/v1", 80},
		{"http://127.0.0.1:8080/x", 8080},
		{"https://user@h.example:8443/", 8443},
		{"http://[::1]:9000/", 9000},
		{"https://[::1]/", 443},
		{"http://h:80*", 0},
		{"https://api.example.com*", 0},
		{"*", 0},
		{"ftp://h/", 0},
		{"http://h:port/", 0},
	} {
		p := &plan{}
		p.url(c.url, "test")
		switch {
		case c.port == 0 && (!p.anyConnect || len(p.connect) != 0):
			t.Errorf("%s: connect %v, any %v; want unbounded", c.url, p.connect, p.anyConnect)
		case c.port != 0 && (p.anyConnect || !slices.Equal(p.connect, []uint16{c.port})):
			t.Errorf("%s: connect %v, any %v; want %d", c.url, p.connect, p.anyConnect, c.port)
		}
	}
}

// TestDerive: policy patterns become hierarchies, missing write targets
// widen to their nearest existing ancestor (reported), and the system
// locations come only with children or network needs.
func TestDerive(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root+"/data")
	writeFile(t, root+"/data/f", "x")
	wf := &workflow.Workflow{Name: "d", Policy: &workflow.Policy{FS: &workflow.FSPolicy{
		Read:  []string{root + "/data/**", root + "/data/f", "relative/**", root + "/gone/**"},
		Write: []string{root + "/new/deeper/**", root + "/data/pre*"},
	}}}
	p := derive(confine.Request{Workflow: wf}, func(string) string { return "" }, false)
	got := map[string]pathRule{}
	for _, r := range p.paths {
		r.access |= got[r.path].access // rules on one path add up
		got[r.path] = r
	}
	if r := got[root+"/data"]; !r.dir || r.access&rReadDir != rReadDir {
		t.Errorf("data tree: %+v", r)
	}
	if r := got[root+"/data/f"]; r.dir || r.access != rRead&fileRights {
		t.Errorf("exact file: %+v (a file takes file rights only)", r)
	}
	if r := got[root+"/new/deeper"]; !r.dir || r.access != rWrite {
		t.Errorf("missing write directory: %+v, want the rule planned on it (Apply creates it)", r)
	}
	if _, ok := got[root+"/gone"]; ok {
		t.Errorf("a missing read target was granted")
	}
	for _, want := range []string{"relative pattern", "/gone does not exist", "will be created at start-up", "a name prefix"} {
		if !slices.ContainsFunc(p.notEnforced, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("not_enforced lacks %q: %v", want, p.notEnforced)
		}
	}
	for path := range got {
		if strings.HasPrefix(path, "/usr/lib") || strings.HasPrefix(path, "/etc/") {
			t.Errorf("%s granted without children or network needs", path)
		}
	}
	if len(p.connect) != 0 || p.anyConnect {
		t.Errorf("connect %v (any %v) without network needs: want none", p.connect, p.anyConnect)
	}

	wf.Policy.HTTP = &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/*"}}
	wf.Policy.Shell = &workflow.ShellPolicy{Commands: []string{"/bin/cat"}}
	p = derive(confine.Request{Workflow: wf, Binds: []string{"127.0.0.1:8080"}}, func(string) string { return "" }, false)
	if !slices.Equal(p.connect, []uint16{53, 443}) || !slices.Equal(p.bind, []uint16{8080}) {
		t.Errorf("connect %v bind %v, want [53 443] and [8080]", p.connect, p.bind)
	}
	has := func(path string) bool {
		return slices.ContainsFunc(p.paths, func(r pathRule) bool { return r.path == path })
	}
	for _, path := range []string{"/bin/cat", "/etc/resolv.conf", "/usr/lib"} {
		if _, err := os.Stat(path); err == nil && !has(path) {
			t.Errorf("%s not granted with children and network needs", path)
		}
	}
}

// TestWanted: every workflow with a [policy] is confined unless [sandbox]
// turns Landlock off.
func TestWanted(t *testing.T) {
	fsOnly := &workflow.Workflow{Policy: &workflow.Policy{FS: &workflow.FSPolicy{Write: []string{"/tmp/x/**"}}}}
	shell := &workflow.Workflow{Policy: &workflow.Policy{Shell: &workflow.ShellPolicy{Commands: []string{"/bin/true"}}}}
	declared := &workflow.Workflow{Policy: &workflow.Policy{}, Sandbox: &workflow.Sandbox{Landlock: "best_effort"}}
	off := &workflow.Workflow{Policy: shell.Policy, Sandbox: &workflow.Sandbox{Landlock: "off"}}
	allowAll := &workflow.Workflow{Sandbox: &workflow.Sandbox{Landlock: "best_effort"}}
	// Child workflows run under the root's policy.
	child := &workflow.Workflow{Policy: shell.Policy, Children: map[string]*workflow.Workflow{"c.toml": {}}}
	rootless := &workflow.Workflow{Children: map[string]*workflow.Workflow{"c.toml": shell}}
	for _, c := range []struct {
		name string
		wf   *workflow.Workflow
		want bool
	}{{"fs only", fsOnly, true}, {"shell", shell, true}, {"declared", declared, true}, {"off", off, false},
		{"no policy", allowAll, false}, {"child without policy", child, true}, {"root without policy", rootless, false}} {
		if got, why := confine.Wanted(c.wf); got != c.want || (!got && why == "") {
			t.Errorf("%s: Wanted = %v (%q), want %v", c.name, got, why, c.want)
		}
	}
}

// BenchmarkRuleset is the start-up cost of building the ruleset of a
// workflow with shell commands and network needs (derivation, opening
// every path, adding every rule), all of Apply but the final
// landlock_restrict_self, which cannot be undone and so is measured by
// TestApplyCost in child processes.
func BenchmarkRuleset(b *testing.B) {
	if kernelABI() == 0 {
		b.Skip("no Landlock")
	}
	wf := &workflow.Workflow{Name: "bench", Policy: &workflow.Policy{
		FS:    &workflow.FSPolicy{Read: []string{b.TempDir() + "/**"}, Write: []string{b.TempDir() + "/**"}},
		HTTP:  &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/*"}},
		Shell: &workflow.ShellPolicy{Commands: []string{"/bin/cat"}},
	}}
	req := confine.Request{Workflow: wf, Binds: []string{"127.0.0.1:8080"}}
	for b.Loop() {
		_, rs := build(req, false)
		fd, _, err := rs.cfg.NewRulesetFD(rs.rules...)
		if err != nil {
			b.Fatal(err)
		}
		closeFD(fd)
	}
}

func closeFD(fd int) { os.NewFile(uintptr(fd), "ruleset").Close() }

// TestApplyCost reports (it asserts nothing about time) how long start-up
// confinement takes, derivation and landlock_restrict_self on every
// thread included, over fresh child processes.
func TestApplyCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 15 child processes")
	}
	requireLandlock(t)
	wf := &workflow.Workflow{Name: "cost", Policy: &workflow.Policy{
		FS:    &workflow.FSPolicy{Read: []string{t.TempDir() + "/**"}, Write: []string{t.TempDir() + "/**"}},
		HTTP:  &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/*"}},
		Shell: &workflow.ShellPolicy{Commands: []string{"/bin/cat"}},
	}}
	var ns []int64
	for range 15 {
		run := runChild(t, "probe", childSpec{Workflow: wf, Request: confine.Request{Binds: []string{"127.0.0.1:8080"}}})
		if run.Report == nil || !run.Report.Confined {
			t.Fatalf("not confined: %+v\n%s", run.Report, run.Stderr)
		}
		ns = append(ns, run.ApplyNS)
	}
	slices.Sort(ns)
	t.Logf("confine.Apply over %d processes: median %d µs, min %d µs, max %d µs",
		len(ns), ns[len(ns)/2]/1000, ns[0]/1000, ns[len(ns)-1]/1000)
}

// TestCatalogLinksByWanted: the generator links this family exactly when
// the runtime would confine (confine.Wanted), so a sealed binary never
// lacks the family it needs, and hello-sized binaries do not carry it.
func TestCatalogLinksByWanted(t *testing.T) {
	terminate := []workflow.Node{{ID: "done", Type: "terminate"}}
	shell := &workflow.Workflow{Nodes: terminate, Policy: &workflow.Policy{Shell: &workflow.ShellPolicy{Commands: []string{"/bin/true"}}}}
	fsOnly := &workflow.Workflow{Nodes: terminate, Policy: &workflow.Policy{FS: &workflow.FSPolicy{Write: []string{"/tmp/x/**"}}}}
	declared := &workflow.Workflow{Nodes: terminate, Policy: fsOnly.Policy, Sandbox: &workflow.Sandbox{Landlock: "required"}}
	off := &workflow.Workflow{Nodes: terminate, Policy: shell.Policy, Sandbox: &workflow.Sandbox{Landlock: "off"}}
	for _, wf := range []*workflow.Workflow{shell, fsOnly, declared, off} {
		u, err := catalog.Used(wf)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := confine.Wanted(wf)
		if got := slices.Contains(u.Families, "sandbox"); got != want {
			t.Errorf("families %v: sandbox linked %v, confine.Wanted %v", u.Families, got, want)
		}
	}
}
