package policy

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "anything at all", true},
		{"*", "", true},
		{"/data/**", "/data", true},
		{"/data/**", "/data/a/b.txt", true},
		{"/data/**", "/database", false},
		{"/data/*", "/data", true},
		{"/data/*", "/data/x/y", true},
		{"/data/*", "/datax", false},
		{"/**", "/etc/passwd", true},
		{"AGENT_*", "AGENT_TOKEN", true},
		{"AGENT_*", "AGENT_", true},
		{"AGENT_*", "AGENTX", false},
		{"HOME", "HOME", true},
		{"HOME", "HOMEDIR", false},
		{"HOME", "home", false},
		{"docs://pages/*", "docs://pages/42", true},
		{"docs://pages/*", "docs://pages", true},
		{"docs://pages/*", "docs://pagesX/1", false},
		{"http://api.example/*", "http://api.example/v1/x", true},
		{"http://api.example/*", "http://api.example.evil/v1", false},
		{"/data/a?", "/data/ab", false}, // no other globbing
	}
	for _, c := range cases {
		if got := Match(c.pattern, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func mustDenial(t *testing.T, err error, what, targetPart string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s denial, got nil", what)
	}
	d, ok := err.(*Denial)
	if !ok {
		t.Fatalf("want *Denial, got %T: %v", err, err)
	}
	if d.What != what || !strings.Contains(d.Target, targetPart) {
		t.Fatalf("denial = %+v, want what %s and target containing %q", d, what, targetPart)
	}
	if !strings.Contains(d.Error(), "denied on") {
		t.Fatalf("denial text %q does not say 'denied on'", d.Error())
	}
}

func TestAllowAllWithoutPolicy(t *testing.T) {
	p := New(nil)
	if !p.AllowAll() {
		t.Fatal("nil policy must be allow-all")
	}
	dir := t.TempDir()
	got, err := p.FSWrite(filepath.Join(dir, "x", "y.txt"))
	if err != nil || got != filepath.Join(dir, "x", "y.txt") {
		t.Fatalf("FSWrite = %q, %v", got, err)
	}
	if err := p.EnvRead("ANY"); err != nil {
		t.Fatal(err)
	}
	if _, err := httpCheck(p, "DELETE", "https://example.invalid/x"); err != nil {
		t.Fatal(err)
	}
	if err := p.MCPTool("s", "t"); err != nil {
		t.Fatal(err)
	}
	// A '..' is refused even without a policy: the path is malformed.
	_, err = p.FSRead(dir + "/a/../b")
	mustDenial(t, err, "fs.read", "..")
}

func TestDenyByDefaultPerFamily(t *testing.T) {
	// A [policy] block with only env: every other family is denied.
	p := New(&workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"HOME"}}})
	if err := p.EnvRead("HOME"); err != nil {
		t.Fatal(err)
	}
	mustDenial(t, p.EnvRead("PATH"), "env.read", "PATH")
	_, err := p.FSRead(t.TempDir())
	mustDenial(t, err, "fs.read", "/")
	_, err = httpCheck(p, "GET", "http://example.invalid/")
	mustDenial(t, err, "http.request", "example.invalid")
	mustDenial(t, p.Shell("/bin/true"), "shell.run", "true")
	mustDenial(t, p.MCPTool("", "say_hi"), "mcp.tool", "say_hi")
	mustDenial(t, p.MCPResource("", "docs://x"), "mcp.resource", "docs://x")

	// An empty allowlist denies everything of its family.
	p = New(&workflow.Policy{FS: &workflow.FSPolicy{Write: []string{}}})
	_, err = p.FSWrite(filepath.Join(t.TempDir(), "f"))
	mustDenial(t, err, "fs.write", "f")
}

func TestFSAllowlistAndEscapes(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "allowed")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{allowed, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	// allowed/dirlink -> ../outside ; allowed/filelink -> ../outside/secret.txt
	if err := os.Symlink(outside, filepath.Join(allowed, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(allowed, "filelink")); err != nil {
		t.Fatal(err)
	}
	// allowed/dangling -> outside/new.txt (does not exist)
	if err := os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(allowed, "dangling")); err != nil {
		t.Fatal(err)
	}
	p := New(&workflow.Policy{FS: &workflow.FSPolicy{
		Read:  []string{allowed + "/**"},
		Write: []string{allowed + "/**"},
	}})

	// Inside the allowlist, existing or not (parents not created yet).
	got, err := p.FSWrite(filepath.Join(allowed, "new", "deep", "f.txt"))
	if err != nil || got != filepath.Join(allowed, "new", "deep", "f.txt") {
		t.Fatalf("write inside: %q, %v", got, err)
	}
	if _, err := p.FSRead(allowed); err != nil {
		t.Fatalf("the allowed dir itself: %v", err)
	}

	// Outside: plain, '..' escape, symlinked dir, symlinked file, dangling link.
	_, err = p.FSWrite(filepath.Join(outside, "x.txt"))
	mustDenial(t, err, "fs.write", "outside")
	_, err = p.FSWrite(allowed + "/../outside/x.txt")
	mustDenial(t, err, "fs.write", "..")
	_, err = p.FSWrite(allowed + "/sub/../../outside/x.txt")
	mustDenial(t, err, "fs.write", "..")
	_, err = p.FSWrite(filepath.Join(allowed, "dirlink", "x.txt"))
	mustDenial(t, err, "fs.write", filepath.Join(outside, "x.txt"))
	_, err = p.FSRead(filepath.Join(allowed, "filelink"))
	mustDenial(t, err, "fs.read", filepath.Join(outside, "secret.txt"))
	_, err = p.FSWrite(filepath.Join(allowed, "dangling"))
	mustDenial(t, err, "fs.write", "dangling")
	_, err = p.FSWrite("")
	mustDenial(t, err, "fs.write", "")
	_, err = p.FSWrite(allowed + "/a\x00b")
	mustDenial(t, err, "fs.write", "")

	// delete has its own (here absent) list; list falls back to read.
	_, err = p.FSDelete(filepath.Join(allowed, "f"))
	mustDenial(t, err, "fs.delete", "f")
	if _, err := p.FSList(allowed); err != nil {
		t.Fatalf("list should fall back to read: %v", err)
	}
}

func TestFSPatternThroughSymlink(t *testing.T) {
	// The policy names a symlinked directory; targets are matched after
	// resolution, so the resolved form of the pattern must match too.
	root := t.TempDir()
	real := filepath.Join(root, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	p := New(&workflow.Policy{FS: &workflow.FSPolicy{Write: []string{link + "/**"}}})
	got, err := p.FSWrite(filepath.Join(link, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(real, "f.txt") {
		t.Fatalf("resolved = %q, want the real path", got)
	}
}

func TestEnvMatchers(t *testing.T) {
	p := New(&workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"DOCS_ROOT", "KILN_*"}}})
	for _, ok := range []string{"DOCS_ROOT", "KILN_X", "KILN_"} {
		if err := p.EnvRead(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"DOCS_ROOTX", "KILNX", "HOME"} {
		mustDenial(t, p.EnvRead(bad), "env.read", bad)
	}
	p = New(&workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"*"}}})
	if err := p.EnvRead("WHATEVER"); err != nil {
		t.Fatal(err)
	}
}

func TestHTTP(t *testing.T) {
	p := New(&workflow.Policy{HTTP: &workflow.HTTPPolicy{
		URLs:    []string{"http://127.0.0.1:8080/*", "https://api.example/v1/**"},
		Methods: []string{"GET", "post"},
	}})
	explicit, err := httpCheck(p, "POST", "http://127.0.0.1:8080/hook")
	if err != nil || !explicit {
		t.Fatalf("allowed url: explicit=%v err=%v", explicit, err)
	}
	if _, err := httpCheck(p, "GET", "https://api.example/v1/items?q=1"); err != nil {
		t.Fatal(err)
	}
	_, err = httpCheck(p, "DELETE", "http://127.0.0.1:8080/hook")
	mustDenial(t, err, "http.request", "DELETE")
	_, err = httpCheck(p, "GET", "https://api.example/v2/items")
	mustDenial(t, err, "http.request", "v2")
	_, err = httpCheck(p, "GET", "https://api.example/v1/../admin")
	mustDenial(t, err, "http.request", "admin")
	_, err = httpCheck(p, "GET", "https://api.example/v1/%2e%2e/admin")
	mustDenial(t, err, "http.request", "admin")
	_, err = httpCheck(p, "GET", "ftp://api.example/v1/x")
	mustDenial(t, err, "http.request", "ftp")
	_, err = httpCheck(p, "GET", "/relative")
	mustDenial(t, err, "http.request", "relative")

	// methods empty = any; "*" allows any URL but names no host.
	p = New(&workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{"*"}}})
	explicit, err = httpCheck(p, "PATCH", "http://10.0.0.1/x")
	if err != nil || explicit {
		t.Fatalf("wildcard: explicit=%v err=%v", explicit, err)
	}
}

func TestShellResolvesSymlinks(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An allowlisted name that is really a link to something else.
	allowedDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(allowedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(allowedDir, "sneaky")); err != nil {
		t.Fatal(err)
	}
	p := New(&workflow.Policy{Shell: &workflow.ShellPolicy{Commands: []string{tool, allowedDir + "/*"}}})
	got, err := p.ShellResolve(tool)
	if err != nil || got != tool {
		t.Fatalf("ShellResolve(tool) = %q, %v", got, err)
	}
	mustDenial(t, p.Shell(filepath.Join(allowedDir, "sneaky")), "shell.run", "other")
	mustDenial(t, p.Shell("tool"), "shell.run", "tool")
}

func TestMCP(t *testing.T) {
	p := New(&workflow.Policy{MCP: &workflow.MCPPolicy{
		Servers: []string{"docs"}, Tools: []string{"comment_on_page"}, Resources: []string{"docs://pages/*"},
	}})
	if err := p.MCPTool("docs", "comment_on_page"); err != nil {
		t.Fatal(err)
	}
	mustDenial(t, p.MCPTool("docs", "delete_page"), "mcp.tool", "delete_page")
	mustDenial(t, p.MCPTool("evil", "comment_on_page"), "mcp.tool", "evil")
	if err := p.MCPResource("", "docs://pages/42"); err != nil {
		t.Fatal(err)
	}
	mustDenial(t, p.MCPResource("docs", "docs://admin/1"), "mcp.resource", "admin")
}

// httpCheck parses rawURL as an HTTP client does and asks the policy.
func httpCheck(p *Policy, method, rawURL string) (bool, error) {
	r := HTTPRequest{Method: method, URL: rawURL}
	if u, err := url.Parse(rawURL); err == nil {
		r.Scheme, r.Host, r.Path = u.Scheme, u.Host, u.Path
	}
	return p.HTTP(r)
}
