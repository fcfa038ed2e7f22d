// Package policy decides what the compiled-in tools may touch (each node
// kind's gate: docs/reference.md). A workflow without [policy] allows everything
// (development only; the CLI warns); with [policy], every family not listed
// is denied, and so is every target no pattern of its family matches.
//
// Filesystem targets are cleaned, any ".." segment is refused, and the
// longest existing prefix of the path is resolved through symlinks before
// matching, so neither a ".." nor a symlink can lead a read or write out of
// the allowlist. The checks return the resolved path: handlers must use it,
// not the path they were given.
package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Denial is a refused check. The engine maps it to a policy error: the run
// aborts, the denial is counted and audited, and it is never retried.
type Denial struct {
	What   string // fs.read, fs.write, fs.delete, fs.list, env.read, http.request, shell.run, mcp.tool, mcp.resource, llm.infer
	Target string
	Reason string
	// Source is SourceRego when [policy.rego] denied what the static
	// allowlist allowed; "" for the static allowlist.
	Source string
}

func (d *Denial) Error() string {
	return fmt.Sprintf("%s denied on %s: %s", d.What, d.Target, d.Reason)
}

// IsDenial reports whether err is (or wraps) a policy denial.
func IsDenial(err error) bool {
	var d *Denial
	return errors.As(err, &d)
}

// Policy is a compiled [policy] block. It is immutable and safe for
// concurrent use.
type Policy struct {
	spec     *workflow.Policy // nil: allow all
	allowAll bool

	// Filesystem and shell patterns, each with the variant whose literal
	// prefix is resolved through symlinks (see resolvePatterns).
	fsRead, fsWrite, fsDelete, fsList []string
	shell                             []string

	// extra is the [policy.rego] decision (decider.go), consulted only
	// after the static allowlist allows; nil without [policy.rego].
	extra Decider
}

// New compiles p; nil means allow-all. A [policy.rego] block is not
// prepared here: every check then fails closed, so use Compile.
func New(p *workflow.Policy) *Policy {
	pol := &Policy{spec: p, allowAll: p == nil}
	if p == nil {
		return pol
	}
	if p.Rego != nil {
		pol.extra = notCompiled{}
	}
	if p.FS != nil {
		pol.fsRead = resolvePatterns(p.FS.Read)
		pol.fsWrite = resolvePatterns(p.FS.Write)
		pol.fsDelete = resolvePatterns(p.FS.Delete)
		pol.fsList = resolvePatterns(p.FS.List)
		if len(p.FS.List) == 0 {
			pol.fsList = pol.fsRead // list falls back to read
		}
	}
	if p.Shell != nil {
		pol.shell = resolvePatterns(p.Shell.Commands)
	}
	return pol
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
// trailing "*" is a plain prefix ("AGENT_*", "http://host:80*"); everything
// else is exact. There is no other globbing.
func Match(pattern, s string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "/**"):
		return under(strings.TrimSuffix(pattern, "/**"), s)
	case strings.HasSuffix(pattern, "/*"):
		return under(strings.TrimSuffix(pattern, "/*"), s)
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(s, strings.TrimSuffix(pattern, "*"))
	}
	return pattern == s
}

// under reports whether s is base itself or lies below it ("/**" leaves
// base "", which covers every absolute path).
func under(base, s string) bool {
	return s == base || strings.HasPrefix(s, base+"/")
}

// MatchAny reports whether any pattern matches s.
func MatchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if Match(p, s) {
			return true
		}
	}
	return false
}

// resolvePatterns adds, for each absolute path pattern whose literal part
// exists and runs through a symlink, the same pattern on the resolved path:
// targets are matched after symlink resolution, so "/var/data/**" must also
// cover what /var/data really is.
func resolvePatterns(patterns []string) []string {
	out := make([]string, 0, len(patterns))
	for _, pat := range patterns {
		out = append(out, pat)
		if pat == "*" || !filepath.IsAbs(pat) {
			continue
		}
		base, suffix := pat, ""
		for _, s := range []string{"/**", "/*", "*"} {
			if strings.HasSuffix(pat, s) {
				base, suffix = strings.TrimSuffix(pat, s), s
				break
			}
		}
		if base == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(base)
		if err == nil && real != base {
			out = append(out, real+suffix)
		}
	}
	return out
}

// FSRead checks a read of path and returns the resolved path to use.
func (p *Policy) FSRead(path string) (string, error) { return p.fsResolved(FSReadCheck, path) }

// FSWrite checks a write (or mkdir) of path and returns the resolved path.
func (p *Policy) FSWrite(path string) (string, error) { return p.fsResolved(FSWriteCheck, path) }

// FSDelete checks a removal of path and returns the resolved path. No node
// deletes yet; one that does must open beneath FSTarget's root and confirm
// with FSConfirm, as capabilities/fs does for reads and writes.
func (p *Policy) FSDelete(path string) (string, error) { return p.fsResolved(FSDeleteCheck, path) }

// FSList checks a directory listing; an empty `list` falls back to `read`.
// No node lists yet; the note on FSDelete applies.
func (p *Policy) FSList(path string) (string, error) { return p.fsResolved(FSListCheck, path) }

// The filesystem checks, as FSTarget and FSConfirm name them (and as a
// Denial's What reports them).
const (
	FSReadCheck   = "fs.read"
	FSWriteCheck  = "fs.write"
	FSDeleteCheck = "fs.delete"
	FSListCheck   = "fs.list"
)

func (p *Policy) fsResolved(what, path string) (string, error) {
	resolved, _, err := p.FSTarget(what, path)
	return resolved, err
}

// fsAllow is the allowlist of a filesystem check (nil for an unknown one).
func (p *Policy) fsAllow(what string) []string {
	switch what {
	case FSReadCheck:
		return p.fsRead
	case FSWriteCheck:
		return p.fsWrite
	case FSDeleteCheck:
		return p.fsDelete
	case FSListCheck:
		return p.fsList
	}
	return nil
}

// FSTarget checks what (FSReadCheck, FSWriteCheck, ...) on path, as FSRead
// and the others do, and also returns the allowlist root of the resolved
// path: the literal directory of the deepest pattern that matches it ("/"
// when allow-all). The check resolves symlinks by name, so it holds only
// for the moment it ran: a handler opens root, resolves the rest of the
// path beneath it (capabilities/internal/beneath), and confirms the object
// it opened with FSConfirm before using it.
func (p *Policy) FSTarget(what, path string) (resolved, root string, err error) {
	switch what {
	case FSReadCheck, FSWriteCheck, FSDeleteCheck, FSListCheck:
	default:
		return "", "", deny(what, path, "unknown filesystem check")
	}
	resolved, err = ResolvePath(path)
	if err != nil {
		return "", "", deny(what, path, err.Error())
	}
	if p.allowAll {
		return resolved, "/", nil
	}
	if p.spec.FS == nil {
		return "", "", deny(what, resolved, "no [policy.fs] section (deny by default)")
	}
	allow := p.fsAllow(what)
	if !MatchAny(allow, resolved) {
		return "", "", deny(what, resolved, "not in the allowlist")
	}
	if err := p.decide(what, resolved, map[string]any{"path": resolved}); err != nil {
		return "", "", err
	}
	return resolved, rootOf(allow, resolved), nil
}

// FSConfirm checks real, the path the kernel reports for an object a
// handler opened (or the path of one it is about to create), against the
// allowlist of what: the check on the object itself, which no rename or
// symlink swap after FSTarget can change.
func (p *Policy) FSConfirm(what, real string) error {
	if p.allowAll {
		return nil
	}
	if p.spec.FS == nil || !MatchAny(p.fsAllow(what), real) {
		return deny(what, real, "not in the allowlist")
	}
	return p.decide(what, real, map[string]any{"path": real})
}

// rootOf returns the deepest literal directory of a pattern in allow that
// matches the absolute path s, "/" if none has one: "/d" for "/d/**",
// "/d/*" and the prefix "/d/x*", and an exact path's parent directory.
func rootOf(allow []string, s string) string {
	root := "/"
	for _, pat := range allow {
		if !filepath.IsAbs(pat) || !Match(pat, s) {
			continue
		}
		var dir string
		switch {
		case strings.HasSuffix(pat, "/**"):
			dir = strings.TrimSuffix(pat, "/**")
		case strings.HasSuffix(pat, "/*"):
			dir = strings.TrimSuffix(pat, "/*")
		case strings.HasSuffix(pat, "*"):
			dir = filepath.Dir(strings.TrimSuffix(pat, "*"))
		default:
			dir = filepath.Dir(pat)
		}
		dir = filepath.Clean("/" + dir)
		if len(dir) > len(root) && (s == dir || strings.HasPrefix(s, dir+"/")) {
			root = dir
		}
	}
	return root
}

// ResolvePath makes path absolute, refuses any ".." segment, and resolves
// the longest existing prefix through symlinks (the part that does not
// exist yet is appended unchanged). A dangling symlink is refused: what it
// would create is outside anyone's view.
func ResolvePath(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("empty path")
	}
	if strings.ContainsRune(path, 0) {
		return "", fmt.Errorf("path contains a NUL byte")
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
	rest := ""
	cur := abs
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%s is a symlink that cannot be resolved", cur)
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
		return deny("env.read", key, "no [policy.env] section (deny by default)")
	}
	if !MatchAny(p.spec.Env.ReadKeys, key) {
		return deny("env.read", key, "not in the allowlist")
	}
	return p.decide("env.read", key, map[string]any{"key": key})
}

// HTTPRequest is an outbound request as the policy sees it. The caller
// parses the URL (with net/url), so binaries that make no HTTP requests do
// not link a URL parser through the policy.
type HTTPRequest struct {
	Method string
	URL    string // as written: matched against [policy.http] urls
	// Scheme, Host and Path of the parsed URL (Path decoded); all empty
	// when the URL did not parse.
	Scheme, Host, Path string
}

// HTTP checks an outbound request. explicit reports whether the URL was
// allowed by a pattern naming its host literally: the SSRF guard then lets
// the request reach loopback and private addresses, and link-local or
// cloud metadata ones only when that host is the IP literal itself.
func (p *Policy) HTTP(r HTTPRequest) (explicit bool, err error) {
	method, rawURL := r.Method, r.URL
	if (r.Scheme != "http" && r.Scheme != "https") || r.Host == "" {
		return false, deny("http.request", rawURL, "not an absolute http(s) URL")
	}
	for _, seg := range strings.Split(r.Path, "/") {
		if seg == ".." {
			return false, deny("http.request", rawURL, "URL path contains a '..' segment")
		}
	}
	if p.allowAll {
		return false, nil
	}
	if p.spec.HTTP == nil {
		return false, deny("http.request", rawURL, "no [policy.http] section (deny by default)")
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
			if err := p.decide("http.request", method+" "+rawURL, map[string]any{"method": method, "url": rawURL}); err != nil {
				return false, err
			}
			return pat != "*" && namesHost(pat, r.Host), nil
		}
	}
	return false, deny("http.request", rawURL, "not in the allowlist")
}

// namesHost reports whether pattern spells out host as its authority.
func namesHost(pattern, host string) bool {
	_, after, ok := strings.Cut(pattern, "://")
	if !ok {
		return false
	}
	auth, _, _ := strings.Cut(after, "/")
	return strings.EqualFold(auth, host)
}

// Shell checks a command. The command is resolved through symlinks first,
// so a link inside an allowed directory cannot run something else. args
// are the arguments it will run with, as [policy.rego] sees them.
func (p *Policy) Shell(command string, args ...string) error {
	_, err := p.ShellResolve(command, args...)
	return err
}

// ShellResolve checks a command and returns its resolved path, which the
// caller must execute.
func (p *Policy) ShellResolve(command string, args ...string) (string, error) {
	resolved, _, err := p.ShellTarget(command, args...)
	return resolved, err
}

// ShellTarget checks a command like ShellResolve and also returns its
// allowlist root (see FSTarget): the caller opens the command beneath it,
// confirms it with ShellConfirm and executes the descriptor it holds, not
// the name. args are the arguments it will run with: [policy.rego] sees
// them (callers must pass them, also to ShellConfirm).
func (p *Policy) ShellTarget(command string, args ...string) (resolved, root string, err error) {
	if !filepath.IsAbs(command) {
		return "", "", deny("shell.run", command, "command must be an absolute path")
	}
	resolved, err = ResolvePath(command)
	if err != nil {
		return "", "", deny("shell.run", command, err.Error())
	}
	if p.allowAll {
		return resolved, "/", nil
	}
	if p.spec.Shell == nil {
		return "", "", deny("shell.run", resolved, "no [policy.shell] section (deny by default)")
	}
	if !MatchAny(p.shell, resolved) {
		return "", "", deny("shell.run", resolved, "not in the allowlist")
	}
	if err := p.decide("shell.run", resolved, shellArgs(resolved, args)); err != nil {
		return "", "", err
	}
	return resolved, rootOf(p.shell, resolved), nil
}

// ShellConfirm checks real, the path the kernel reports for the command a
// caller opened, against the shell allowlist and [policy.rego] (see
// FSConfirm), with the arguments it will run with.
func (p *Policy) ShellConfirm(real string, args ...string) error {
	if p.allowAll {
		return nil
	}
	if p.spec.Shell == nil || !MatchAny(p.shell, real) {
		return deny("shell.run", real, "not in the allowlist")
	}
	return p.decide("shell.run", real, shellArgs(real, args))
}

// shellArgs is the input of a shell.run decision; args is never null.
func shellArgs(command string, args []string) map[string]any {
	if args == nil {
		args = []string{}
	}
	return map[string]any{"command": command, "args": args}
}

// LLMInfer checks one intelligence call on backend (the model it sends,
// "" when the backend does not name one). No static allowlist governs
// intelligence calls, so only [policy.rego] can deny one.
func (p *Policy) LLMInfer(backend, model string) error {
	if p.allowAll {
		return nil
	}
	return p.decide("llm.infer", backend, map[string]any{"backend": backend, "model": model})
}
