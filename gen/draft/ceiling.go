package draft

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnworks/kiln/gen/internal/stricttoml"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Ceiling is the most a drafted workflow's [policy] may allow: a file with
// a [policy] table in the workflow dialect. A draft whose policy allows
// anything the ceiling does not is refused.
type Ceiling struct {
	Policy *workflow.Policy
	File   string
}

// DecodeCeiling strictly decodes a ceiling file: it must hold a [policy]
// table and nothing else.
func DecodeCeiling(name string, data []byte) (*Ceiling, error) {
	var doc struct {
		Policy *workflow.Policy `toml:"policy"`
	}
	md, err := stricttoml.Decode(name, data, &doc)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, fmt.Errorf("%s:%d: unknown key %q (a policy ceiling holds one [policy] table)", name, stricttoml.Line(data, und[0]), und[0].String())
	}
	if doc.Policy == nil {
		return nil, fmt.Errorf("%s: no [policy] table (a policy ceiling is a [policy] table, as in a workflow)", name)
	}
	if doc.Policy.Rego != nil {
		return nil, fmt.Errorf("%s: [policy.rego] cannot be a ceiling: only the static allowlists can be compared", name)
	}
	return &Ceiling{Policy: doc.Policy, File: name}, nil
}

// Broader lists what the policy p allows beyond the ceiling, one line per
// pattern or setting; empty means p is within it. A nil ceiling bounds
// nothing. The comparison is by the matcher grammar of runtime/policy
// (exact, "prefix*", "dir/*" and "dir/**", "*"): a pattern is within the
// ceiling only when every string it matches is matched by one ceiling
// pattern, so anything it cannot prove is reported (fail closed).
func (c *Ceiling) Broader(p *workflow.Policy) []string {
	if c == nil || c.Policy == nil {
		return nil
	}
	if p == nil {
		return []string{"no [policy] block: the workflow would allow every file, variable, URL, command and MCP call"}
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	lists := func(key string, draft, ceil []string, sectionDenied bool) {
		for _, pat := range draft {
			if sectionDenied {
				add("[policy.%s]: %q, but the ceiling has no such section (denied)", key, pat)
				continue
			}
			if !coveredBy(ceil, pat) {
				add("[policy.%s]: %q is not within the ceiling's %s", key, pat, quoteAll(ceil))
			}
		}
	}
	cp := c.Policy
	if p.FS != nil {
		var cfs workflow.FSPolicy
		if cp.FS != nil {
			cfs = *cp.FS
		}
		denied := cp.FS == nil
		lists("fs.read", p.FS.Read, cfs.Read, denied)
		lists("fs.write", p.FS.Write, cfs.Write, denied)
		lists("fs.delete", p.FS.Delete, cfs.Delete, denied)
		// An empty list falls back to read (runtime/policy); compare
		// what each side effectively allows.
		lists("fs.list", effectiveList(p.FS), effectiveList(&cfs), denied)
	}
	if p.Env != nil {
		var keys []string
		if cp.Env != nil {
			keys = cp.Env.ReadKeys
		}
		lists("env.read_keys", p.Env.ReadKeys, keys, cp.Env == nil)
	}
	if p.HTTP != nil {
		var ch workflow.HTTPPolicy
		if cp.HTTP != nil {
			ch = *cp.HTTP
		}
		lists("http.urls", p.HTTP.URLs, ch.URLs, cp.HTTP == nil)
		// No methods means every method.
		if cp.HTTP != nil && len(ch.Methods) > 0 {
			if len(p.HTTP.Methods) == 0 {
				add("[policy.http]: no methods (every method), but the ceiling allows only %s", quoteAll(ch.Methods))
			}
			for _, m := range p.HTTP.Methods {
				if !slices.Contains(ch.Methods, m) {
					add("[policy.http]: method %q is not among the ceiling's %s", m, quoteAll(ch.Methods))
				}
			}
		}
	}
	if p.Shell != nil {
		var cmds []string
		if cp.Shell != nil {
			cmds = cp.Shell.Commands
		}
		lists("shell.commands", p.Shell.Commands, cmds, cp.Shell == nil)
	}
	if p.MCP != nil {
		var cm workflow.MCPPolicy
		if cp.MCP != nil {
			cm = *cp.MCP
		}
		denied := cp.MCP == nil
		// No servers means every server.
		if !denied && len(cm.Servers) > 0 && len(p.MCP.Servers) == 0 {
			add("[policy.mcp]: no servers (every server), but the ceiling allows only %s", quoteAll(cm.Servers))
		}
		if len(cm.Servers) > 0 || denied {
			lists("mcp.servers", p.MCP.Servers, cm.Servers, denied)
		}
		lists("mcp.tools", p.MCP.Tools, cm.Tools, denied)
		lists("mcp.resources", p.MCP.Resources, cm.Resources, denied)
	}
	if p.Rego != nil {
		add("[policy.rego]: a Rego policy cannot be compared with the ceiling")
	}
	return out
}

func effectiveList(fs *workflow.FSPolicy) []string {
	if len(fs.List) == 0 {
		return fs.Read
	}
	return fs.List
}

func quoteAll(list []string) string {
	if len(list) == 0 {
		return "(empty list: nothing)"
	}
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// pattern is one allowlist entry read by the matcher grammar of
// runtime/policy.Match.
type pattern struct {
	kind int // any, tree (base itself and below), prefix, exact
	s    string
}

const (
	patAny = iota
	patTree
	patPrefix
	patExact
)

// parsePattern classifies p exactly as policy.Match reads it, in the same
// order of cases.
func parsePattern(p string) pattern {
	switch {
	case p == "*":
		return pattern{patAny, ""}
	case strings.HasSuffix(p, "/**"):
		return pattern{patTree, strings.TrimSuffix(p, "/**")}
	case strings.HasSuffix(p, "/*"):
		return pattern{patTree, strings.TrimSuffix(p, "/*")}
	case strings.HasSuffix(p, "*"):
		return pattern{patPrefix, strings.TrimSuffix(p, "*")}
	}
	return pattern{patExact, p}
}

func under(base, s string) bool { return s == base || strings.HasPrefix(s, base+"/") }

// covers reports whether every string d matches is matched by c.
func covers(c, d pattern) bool {
	switch c.kind {
	case patAny:
		return true
	case patExact:
		return d.kind == patExact && d.s == c.s
	case patTree:
		switch d.kind {
		case patExact, patTree:
			return under(c.s, d.s)
		case patPrefix:
			// Everything starting with d.s is below c.s only when d.s
			// already reaches into c.s's directory.
			return strings.HasPrefix(d.s, c.s+"/")
		}
	case patPrefix:
		switch d.kind {
		case patExact, patTree, patPrefix:
			return strings.HasPrefix(d.s, c.s)
		}
	}
	return false
}

// coveredBy reports whether one ceiling pattern covers draft pattern d.
func coveredBy(ceiling []string, d string) bool {
	dp := parsePattern(d)
	for _, c := range ceiling {
		if covers(parsePattern(c), dp) {
			return true
		}
	}
	return false
}
