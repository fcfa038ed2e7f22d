// Package policy decides what the compiled-in tools may touch. A workflow
// without [policy] allows everything (development only; the engine warns);
// with [policy], every family not listed is denied.
package policy

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Denial is a refused check. The engine maps it to a policy error.
type Denial struct {
	What   string // fs.read, fs.write, env.read, http.request, shell.run, mcp.tool, mcp.resource
	Target string
	Reason string
}

func (d *Denial) Error() string {
	return fmt.Sprintf("%s denied on %s: %s", d.What, d.Target, d.Reason)
}

// Policy is a compiled [policy] block.
type Policy struct {
	spec     *workflow.Policy // nil: allow all
	allowAll bool
}

// New compiles p; nil means allow-all.
func New(p *workflow.Policy) *Policy {
	return &Policy{spec: p, allowAll: p == nil}
}

// AllowAll reports whether no [policy] block was declared.
func (p *Policy) AllowAll() bool { return p.allowAll }

// Spec returns the declared block (nil when allow-all).
func (p *Policy) Spec() *workflow.Policy { return p.spec }

func deny(what, target, reason string) error {
	return &Denial{What: what, Target: target, Reason: reason}
}

// Match applies the matcher grammar: "*" matches anything; "prefix/**" and
// "prefix/*" match the prefix itself and anything under it; any other
// trailing "*" is a plain prefix; everything else is exact.
func Match(pattern, s string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "/**"):
		base := strings.TrimSuffix(pattern, "/**")
		return s == base || strings.HasPrefix(s, base+"/")
	case strings.HasSuffix(pattern, "/*"):
		base := strings.TrimSuffix(pattern, "/*")
		return s == base || strings.HasPrefix(s, base+"/")
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(s, strings.TrimSuffix(pattern, "*"))
	}
	return pattern == s
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if Match(p, s) {
			return true
		}
	}
	return false
}

// FSRead checks a read of path and returns the resolved path to use.
func (p *Policy) FSRead(path string) (string, error) { return p.fs("fs.read", path) }

// FSWrite checks a write (or mkdir) of path and returns the resolved path.
func (p *Policy) FSWrite(path string) (string, error) { return p.fs("fs.write", path) }

func (p *Policy) fs(what, path string) (string, error) {
	resolved, err := ResolvePath(path)
	if err != nil {
		return "", deny(what, path, err.Error())
	}
	if p.allowAll {
		return resolved, nil
	}
	if p.spec.FS == nil {
		return "", deny(what, resolved, "no [policy.fs] section")
	}
	var list []string
	switch what {
	case "fs.read":
		list = p.spec.FS.Read
	case "fs.write":
		list = p.spec.FS.Write
	}
	if !matchAny(list, resolved) {
		return "", deny(what, resolved, "not in the allowlist")
	}
	return resolved, nil
}

// ResolvePath cleans path, refuses `..` escapes in relative paths, and
// resolves the existing part of it through symlinks, so a link cannot lead
// a write outside the allowlist.
func ResolvePath(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("empty path")
	}
	if strings.ContainsRune(path, 0) {
		return "", fmt.Errorf("path contains NUL")
	}
	for _, seg := range strings.Split(filepath.ToSlash(path), "/") {
		if seg == ".." {
			return "", fmt.Errorf("path contains a '..' segment")
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	abs = filepath.Clean(abs)
	// Resolve the longest existing prefix through symlinks, then re-append
	// the part that does not exist yet.
	rest := ""
	cur := abs
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// EnvRead checks reading an environment variable.
func (p *Policy) EnvRead(key string) error {
	if p.allowAll {
		return nil
	}
	if p.spec.Env == nil {
		return deny("env.read", key, "no [policy.env] section")
	}
	if !matchAny(p.spec.Env.ReadKeys, key) {
		return deny("env.read", key, "not in the allowlist")
	}
	return nil
}

// HTTP checks an outbound request. explicit reports whether the URL was
// allowed by a pattern naming its host literally (the SSRF guard lets such
// requests reach private addresses).
func (p *Policy) HTTP(method, rawURL string) (explicit bool, err error) {
	u, perr := url.Parse(rawURL)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false, deny("http.request", rawURL, "not an absolute http(s) URL")
	}
	if p.allowAll {
		return false, nil
	}
	if p.spec.HTTP == nil {
		return false, deny("http.request", rawURL, "no [policy.http] section")
	}
	if len(p.spec.HTTP.Methods) > 0 {
		ok := false
		for _, m := range p.spec.HTTP.Methods {
			if strings.EqualFold(m, method) {
				ok = true
			}
		}
		if !ok {
			return false, deny("http.request", method+" "+rawURL, "method not allowed")
		}
	}
	for _, pat := range p.spec.HTTP.URLs {
		if Match(pat, rawURL) {
			return pat != "*" && strings.Contains(pat, "://"+u.Host), nil
		}
	}
	return false, deny("http.request", rawURL, "not in the allowlist")
}

// Shell checks a command (already resolved through symlinks by the caller).
func (p *Policy) Shell(command string) error {
	if p.allowAll {
		return nil
	}
	if p.spec.Shell == nil {
		return deny("shell.run", command, "no [policy.shell] section")
	}
	if !matchAny(p.spec.Shell.Commands, command) {
		return deny("shell.run", command, "not in the allowlist")
	}
	return nil
}

// MCPTool checks a tool call against [policy.mcp].tools.
func (p *Policy) MCPTool(server, tool string) error {
	if p.allowAll {
		return nil
	}
	if p.spec.MCP == nil {
		return deny("mcp.tool", tool, "no [policy.mcp] section")
	}
	if len(p.spec.MCP.Servers) > 0 && server != "" && !matchAny(p.spec.MCP.Servers, server) {
		return deny("mcp.tool", server+"/"+tool, "server not in the allowlist")
	}
	if !matchAny(p.spec.MCP.Tools, tool) {
		return deny("mcp.tool", tool, "not in the allowlist")
	}
	return nil
}

// MCPResource checks a resource read against [policy.mcp].resources.
func (p *Policy) MCPResource(server, uri string) error {
	if p.allowAll {
		return nil
	}
	if p.spec.MCP == nil {
		return deny("mcp.resource", uri, "no [policy.mcp] section")
	}
	if len(p.spec.MCP.Servers) > 0 && server != "" && !matchAny(p.spec.MCP.Servers, server) {
		return deny("mcp.resource", server+" "+uri, "server not in the allowlist")
	}
	if !matchAny(p.spec.MCP.Resources, uri) {
		return deny("mcp.resource", uri, "not in the allowlist")
	}
	return nil
}
