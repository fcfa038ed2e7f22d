package draft

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// covers must be sound against the runtime's matcher: whenever it says a
// ceiling pattern covers a draft pattern, every string the draft pattern
// matches is matched by the ceiling pattern. Patterns and strings are
// drawn from a small alphabet so that overlaps are common.
func TestCoversIsSoundAgainstPolicyMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		const alpha = "ab/"
		var b strings.Builder
		for range r.IntN(n + 1) {
			b.WriteByte(alpha[r.IntN(len(alpha))])
		}
		return b.String()
	}
	pat := func() string {
		switch r.IntN(5) {
		case 0:
			return "*"
		case 1:
			return word(4) + "/**"
		case 2:
			return word(4) + "/*"
		case 3:
			return word(4) + "*"
		}
		return word(5)
	}
	// Strings a pattern matches, to try against the ceiling: its
	// literal part with every short suffix.
	var samples []string
	for i := 0; i < 300; i++ {
		samples = append(samples, word(7))
	}
	proved := 0
	for i := 0; i < 20000; i++ {
		c, d := pat(), pat()
		if !covers(parsePattern(c), parsePattern(d)) {
			continue
		}
		proved++
		lit := parsePattern(d).s
		for _, s := range append(samples, lit, lit+"/", lit+"/a", lit+"a", lit+"/a/b") {
			if policy.Match(d, s) && !policy.Match(c, s) {
				t.Fatalf("covers(%q, %q) but %q matches only the draft pattern", c, d, s)
			}
		}
	}
	if proved < 1000 {
		t.Fatalf("only %d covering pairs drawn: the test proves little", proved)
	}
}

func TestCoversCases(t *testing.T) {
	for _, tc := range []struct {
		ceil, draft string
		want        bool
	}{
		{"/data/**", "/data/in/x.txt", true},
		{"/data/**", "/data/**", true},
		{"/data/**", "/data/in/*", true},
		{"/data/**", "/data", true},
		{"/data/**", "/database", false},
		{"/data/**", "/data*", false},
		{"/data/**", "/data/in*", true},
		{"/data/**", "*", false},
		{"/data/**", "/**", false},
		{"/data/x", "/data/x", true},
		{"/data/x", "/data/x/**", false},
		{"AGENT_*", "AGENT_NAME", true},
		{"AGENT_*", "AGENT*", false},
		{"https://api.example.com/*", "https://api.example.com/v1/*", true},
		{"https://api.example.com/*", "https://api.example.com.evil/*", false},
		{"*", "anything/**", true},
	} {
		if got := covers(parsePattern(tc.ceil), parsePattern(tc.draft)); got != tc.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tc.ceil, tc.draft, got, tc.want)
		}
	}
}

func TestBroaderThanCeiling(t *testing.T) {
	ceil, err := DecodeCeiling("ceiling.toml", []byte(`
[policy.fs]
read = ["/srv/in/**"]
write = ["/srv/out/**"]
[policy.http]
urls = ["https://api.example.com/*"]
methods = ["GET"]
`))
	if err != nil {
		t.Fatal(err)
	}
	within := &workflow.Policy{
		FS:   &workflow.FSPolicy{Read: []string{"/srv/in/a.json"}, Write: []string{"/srv/out/**"}},
		HTTP: &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/v1/status"}, Methods: []string{"GET"}},
	}
	if got := ceil.Broader(within); len(got) != 0 {
		t.Fatalf("a policy inside the ceiling was reported broader: %q", got)
	}
	for name, tc := range map[string]struct {
		p    *workflow.Policy
		want string
	}{
		"no policy":                       {nil, "no [policy] block"},
		"write elsewhere":                 {&workflow.Policy{FS: &workflow.FSPolicy{Write: []string{"/etc/**"}}}, `[policy.fs.write]: "/etc/**"`},
		"list falls back to a broad read": {&workflow.Policy{FS: &workflow.FSPolicy{Read: []string{"/srv/in/**"}, List: []string{"/**"}}}, `[policy.fs.list]: "/**"`},
		"shell denied by the ceiling":     {&workflow.Policy{Shell: &workflow.ShellPolicy{Commands: []string{"/bin/sh"}}}, "[policy.shell.commands]: \"/bin/sh\", but the ceiling has no such section"},
		"any method":                      {&workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/x"}}}, "no methods (every method)"},
		"another method":                  {&workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/x"}, Methods: []string{"DELETE"}}}, `method "DELETE"`},
		"env denied":                      {&workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"HOME"}}}, "[policy.env.read_keys]"},
		"mcp denied":                      {&workflow.Policy{MCP: &workflow.MCPPolicy{Tools: []string{"x"}}}, "[policy.mcp.tools]"},
	} {
		got := strings.Join(ceil.Broader(tc.p), "\n")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: want %q among %q", name, tc.want, got)
		}
	}
	var none *Ceiling
	if got := none.Broader(nil); got != nil {
		t.Fatalf("no ceiling bounds nothing, got %q", got)
	}
}

func TestDecodeCeilingStrict(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"[policy.fs]\nreed = [\"/x\"]\n", "unknown key"},
		{"name = \"x\"\n", "unknown key"},
		{"# nothing\n", "no [policy] table"},
		{"[policy.rego]\ninline = \"x\"\n", "cannot be a ceiling"},
	} {
		if _, err := DecodeCeiling("c.toml", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want an error with %q, got %v", tc.src, tc.want, err)
		}
	}
}
