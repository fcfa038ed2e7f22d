package policy

import (
	"strings"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// MCPTool checks a tool call against [policy.mcp].tools.
func (p *Policy) MCPTool(server, tool string) error {
	return p.mcp("mcp.tool", server, server+"/"+tool, tool, func(m *workflow.MCPPolicy) []string { return m.Tools },
		map[string]any{"server": server, "tool": tool})
}

// MCPResource checks a resource read or subscription against
// [policy.mcp].resources.
func (p *Policy) MCPResource(server, uri string) error {
	return p.mcp("mcp.resource", server, server+" "+uri, uri, func(m *workflow.MCPPolicy) []string { return m.Resources },
		map[string]any{"server": server, "uri": uri})
}

// mcp is the one check of an MCP target: no dot segments, then (unless
// allow-all) the server and target allowlists of [policy.mcp]; onServer
// names the target with its server for a server denial; args are the
// input of the [policy.rego] decision taken last.
func (p *Policy) mcp(what, server, onServer, target string, allowed func(*workflow.MCPPolicy) []string, args map[string]any) error {
	if err := CheckMCPTarget(what, target); err != nil {
		return err
	}
	if p.allowAll {
		return nil
	}
	if p.spec.MCP == nil {
		return deny(what, target, "no [policy.mcp] section (deny by default)")
	}
	if len(p.spec.MCP.Servers) > 0 && server != "" && !MatchAny(p.spec.MCP.Servers, server) {
		return deny(what, onServer, "server not in the allowlist")
	}
	if !MatchAny(allowed(p.spec.MCP), target) {
		return deny(what, target, "not in the allowlist")
	}
	return p.decide(what, target, args)
}

// CheckMCPTarget refuses a tool name or resource URI (what is "mcp.tool"
// or "mcp.resource") that has a dot segment. The allowlists match the text
// as written, but a server may resolve docs://pages/../secret to
// docs://secret, so, as for file paths and URLs, no "." or ".." segment
// passes however it is spelled. The text is split into segments at '/'
// and '\' after any scheme, and checked again after each round of
// percent-decoding until decoding changes nothing: %2e%2E is "..", and an
// encoded slash (%2F) or backslash separates segments like a plain one.
// Malformed or deeply nested percent-encoding and NUL bytes are refused
// too. Every check of the per-server allowlists and of [policy.mcp] calls
// this first, even when the policy allows everything.
func CheckMCPTarget(what, target string) error {
	if reason := unsafeTarget(target); reason != "" {
		return deny(what, target, reason)
	}
	return nil
}

// maxDecodeRounds bounds percent-decoding (each round is linear): a
// double encoding is plausible, more is an attack.
const maxDecodeRounds = 3

func unsafeTarget(s string) string {
	for round := 0; ; round++ {
		if strings.IndexByte(s, 0) >= 0 {
			return "contains a NUL byte"
		}
		if seg := dotSegment(s); seg != "" {
			return "contains a '" + seg + "' segment (dot segments are refused, also percent-encoded)"
		}
		decoded, ok := percentDecode(s)
		if !ok {
			return "malformed percent-encoding"
		}
		if decoded == s {
			return ""
		}
		if round == maxDecodeRounds {
			return "percent-encoding nested too deep"
		}
		s = decoded
	}
}

// dotSegment returns the first "." or ".." segment of s, or "".
func dotSegment(s string) string {
	s = stripScheme(s)
	for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return seg
		}
	}
	return ""
}

// stripScheme drops a leading URI scheme ("docs:"), so the path of an
// opaque URI such as docs:../secret starts a segment.
func stripScheme(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':' && i > 0:
			return s[i+1:]
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return s
		}
	}
	return s
}

// percentDecode decodes every %XX once; ok is false for a '%' without two
// hex digits. (The policy package does not link net/url: binaries that
// make no HTTP requests do not carry it.)
func percentDecode(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
