package policy

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// mcpTargets reads testdata/hostile/net/mcp-targets.txt.
func mcpTargets(t *testing.T) (deny map[string]string, allow []string) {
	t.Helper()
	f, err := os.Open("../../testdata/hostile/net/mcp-targets.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deny = map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch {
		case fields[0] == "deny" && len(fields) >= 3:
			deny[fields[1]] = strings.Join(fields[2:], " ")
		case fields[0] == "allow" && len(fields) == 2:
			allow = append(allow, fields[1])
		default:
			t.Fatalf("mcp-targets.txt:%d: want \"deny TARGET REASON\" or \"allow TARGET\"", n)
		}
	}
	if len(deny) < 20 || len(allow) < 10 {
		t.Fatalf("read %d denials and %d allowed targets", len(deny), len(allow))
	}
	return deny, allow
}

// TestMCPDotSegments: every hostile target is refused by [policy.mcp]
// for resources and tools, even by a policy that allows everything; the
// harmless ones pass.
func TestMCPDotSegments(t *testing.T) {
	deny, allow := mcpTargets(t)
	wide := New(&workflow.Policy{MCP: &workflow.MCPPolicy{Tools: []string{"*"}, Resources: []string{"*"}}})
	for _, p := range []*Policy{New(nil), wide} {
		for target, reason := range deny {
			for _, err := range []error{p.MCPResource("docs", target), p.MCPTool("docs", target)} {
				d, ok := err.(*Denial)
				if !ok || d.Target != target || !strings.Contains(d.Reason, reason) {
					t.Errorf("allow-all=%v: %q: %v, want a denial saying %q", p.AllowAll(), target, err, reason)
				}
			}
		}
		for _, target := range allow {
			if err := p.MCPResource("docs", target); err != nil {
				t.Errorf("allow-all=%v: %q refused: %v", p.AllowAll(), target, err)
			}
		}
	}
	// The allowlist that let them through before: docs://pages/*.
	pages := New(&workflow.Policy{MCP: &workflow.MCPPolicy{Resources: []string{"docs://pages/*"}}})
	for _, uri := range []string{"docs://pages/../secret", "docs://pages/a/../../secret", "docs://pages/%2e%2e/secret", "docs://pages/%2E%2E/secret"} {
		if !Match("docs://pages/*", uri) {
			t.Fatalf("%q no longer matches the pattern: the test proves nothing", uri)
		}
		mustDenial(t, pages.MCPResource("", uri), "mcp.resource", "docs://pages/")
	}
}

// TestMCPTargetBounded: a long, deeply encoded target is judged in a few
// linear passes.
func TestMCPTargetBounded(t *testing.T) {
	s := "docs://pages/%" + strings.Repeat("25", 1<<20) + "2e" // %25 nested a million times
	if err := CheckMCPTarget("mcp.resource", s); err == nil || !strings.Contains(err.Error(), "nested too deep") {
		t.Fatalf("%.80v", err)
	}
}
