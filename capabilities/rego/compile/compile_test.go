package compile

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// outward are the built-ins that reach outside the process; none may be
// callable from a policy.
var outward = []string{"http.send", "net.lookup_ip_addr", "opa.runtime", "json.match_schema", "json.verify_schema"}

// TestCapabilitiesRefuseOutwardBuiltins: the capabilities a policy is
// compiled against lack every outward built-in, so OPA's own compiler
// refuses a call to one, whatever the source looks like (this does not
// rely on the friendlier message compileModule gives first).
func TestCapabilitiesRefuseOutwardBuiltins(t *testing.T) {
	caps := Capabilities()
	have := map[string]bool{}
	for _, b := range caps.Builtins {
		have[b.Name] = true
	}
	for _, name := range outward {
		if have[name] {
			t.Errorf("capabilities still offer %s", name)
		}
	}
	if len(caps.AllowNet) != 0 || caps.AllowNet == nil {
		t.Errorf("allow_net = %v, want an empty list (no host)", caps.AllowNet)
	}
	for _, name := range []string{"startswith", "time.now_ns", "glob.match", "io.jwt.decode_verify"} {
		if !have[name] {
			t.Errorf("capabilities lack the local built-in %s", name)
		}
	}
	// Every non-deterministic built-in OPA has is either refused or known
	// to stay inside the process: a new one is refused by default.
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if b.Nondeterministic && have[b.Name] && !strings.HasPrefix(b.Name, "io.jwt.") &&
			b.Name != "time.now_ns" && b.Name != "rand.intn" && b.Name != "uuid.rfc4122" {
			t.Errorf("non-deterministic built-in %s is allowed", b.Name)
		}
	}
	for _, src := range []string{
		"package agent\nallow if { http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1:1\"}).status_code == 200 }",
		"package agent\nallow if { x := net.lookup_ip_addr(\"localhost\"); count(x) > 0 }",
		"package agent\nallow if { opa.runtime().env.HOME }",
		// A reference to the function without a call: still refused.
		"package agent\nf := http.send\nallow if { f }",
	} {
		mod, err := ast.ParseModuleWithOpts("p.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatalf("%q does not parse: %v", src, err)
		}
		c := ast.NewCompiler().WithCapabilities(caps)
		if c.Compile(map[string]*ast.Module{"p.rego": mod}); !c.Failed() {
			t.Errorf("OPA compiled %q against the restricted capabilities", src)
		}
	}
}

// check runs Check on a policy given inline or as a file.
func check(t *testing.T, r *workflow.RegoPolicy, files map[string][]byte) []spec.Issue {
	t.Helper()
	wf := &workflow.Workflow{Policy: &workflow.Policy{Rego: r}, Assets: files}
	return Check(wf, spec.ForWorkflow(wf))
}

// TestBadPoliciesRefused: each bad policy gets its stable code and a
// message with the file (or inline) and the line, from kiln check and
// from Prepare at start-up alike.
func TestBadPoliciesRefused(t *testing.T) {
	cases := []struct {
		name, src, code, want string
	}{
		{"syntax", "package agent\n\nallow if {\n  input.tool ==\n}\n", "rego_parse_error", "policy.rego:5: rego_parse_error:"},
		{"no package", "allow := true\n", "rego_parse_error", "policy.rego:1: rego_parse_error: package expected"},
		{"empty", "", "rego_parse_error", "policy.rego:1: the policy is empty"},
		{"comments only", "# nothing\n", "rego_parse_error", "policy.rego:1: rego_parse_error: empty module"},
		{"wrong package", "# a comment\npackage agent.tools\nallow := true\n", "rego_package", "policy.rego:2: package agent.tools, want package agent"},
		{"http.send", "package agent\n\nallow if {\n  r := http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1:1\"})\n  r.status_code == 200\n}\n",
			"rego_builtin_refused", "policy.rego:4: http.send is refused (it sends HTTP requests)"},
		{"net.lookup_ip_addr", "package agent\nallow if {\n  count(net.lookup_ip_addr(\"example.com\")) > 0\n}\n",
			"rego_builtin_refused", "policy.rego:3: net.lookup_ip_addr is refused"},
		{"opa.runtime", "package agent\nallow if {\n  opa.runtime().env.ADMIN == \"1\"\n}\n",
			"rego_builtin_refused", "policy.rego:3: opa.runtime is refused (it reads the process environment and configuration)"},
		{"json.match_schema", "package agent\nallow if {\n  [ok, _] := json.match_schema(input.args, {\"$ref\": \"http://127.0.0.1:1/s.json\"})\n  ok\n}\n",
			"rego_builtin_refused", "policy.rego:3: json.match_schema is refused"},
		{"unsafe var", "package agent\n\nallow if {\n  input.tool == x\n}\n", "rego_compile_error", "policy.rego:4: rego_unsafe_var_error: var x is unsafe"},
		{"type error", "package agent\nallow if {\n  startswith(input.args.path, 1)\n}\n", "rego_compile_error", "policy.rego:3: rego_type_error:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &workflow.RegoPolicy{File: "policy.rego"}
			files := map[string][]byte{"policy.rego": []byte(c.src)}
			issues := check(t, r, files)
			if len(issues) == 0 || issues[0].Code != c.code || !strings.Contains(issues[0].Message, c.want) {
				t.Fatalf("issues %v, want %s containing %q", issues, c.code, c.want)
			}
			if _, err := Prepare(r, files); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Prepare: %v, want %q", err, c.want)
			}
			// Inline, the same message names "inline".
			issues = check(t, &workflow.RegoPolicy{Inline: c.src + "\n"}, nil)
			if c.src != "" && (len(issues) == 0 || !strings.Contains(issues[0].Message, strings.Replace(c.want, "policy.rego:", "inline:", 1))) {
				t.Fatalf("inline: %v", issues)
			}
		})
	}
	// A good policy has no issue.
	if issues := check(t, &workflow.RegoPolicy{Inline: "package agent\ndefault allow := false\n"}, nil); len(issues) != 0 {
		t.Fatalf("good policy: %v", issues)
	}
	// Shape problems are the spec's; Check adds nothing while they stand.
	if issues := check(t, &workflow.RegoPolicy{Inline: "package agent", File: "p.rego"}, nil); len(issues) != 0 {
		t.Fatalf("shape issues repeated: %v", issues)
	}
}

func decider(t *testing.T, src string, data map[string]string, query string) *Decider {
	t.Helper()
	d, err := Prepare(&workflow.RegoPolicy{Inline: src, Data: data, Query: query}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOnlyTrueAllows: undefined, false, a non-boolean and an evaluation
// error all deny; data is merged at the root of data; query selects the
// decision.
func TestOnlyTrueAllows(t *testing.T) {
	req := policy.Request{Tool: "env.read", Args: map[string]any{"key": "A"}}
	for name, c := range map[string]struct {
		src, query string
		allow      bool
	}{
		"true":        {"package agent\nallow := true", "", true},
		"undefined":   {"package agent\nallow if input.tool == \"fs.read\"", "", false},
		"false":       {"package agent\nallow := false", "", false},
		"not boolean": {"package agent\nallow := \"yes\"", "", false},
		"a set":       {"package agent\nallow contains 1", "", false},
		"error":       {"package agent\nallow if { x := to_number(input.args.key); x > 0 }", "", false},
		"conflict":    {"package agent\nv := 1 if input.tool\nv := 2 if input.tool\nallow if v", "", false},
		"query":       {"package agent\nok := true", "data.agent.ok", true},
		"data":        {"package agent\nallow if input.args.key == data.team", "", true},
	} {
		d := decider(t, c.src, map[string]string{"team": "A"}, c.query)
		err := d.Decide(req)
		if (err == nil) != c.allow {
			t.Errorf("%s: Decide = %v, want allow %v", name, err, c.allow)
		}
	}
}

// TestQueryMustNameARule: a query that names no rule and no data key
// would deny everything; check and start-up refuse it as a typo.
func TestQueryMustNameARule(t *testing.T) {
	for _, r := range []*workflow.RegoPolicy{
		{Inline: "package agent\nalow := true"},
		{Inline: "package agent\nallow := true", Query: "data.agent.permit"},
		{Inline: "package agent\nallow := true", Query: "data.team"},
	} {
		issues := check(t, r, nil)
		if len(issues) != 1 || issues[0].Code != "rego_query_undefined" {
			t.Errorf("%+v: issues %v", r, issues)
		}
		if _, err := Prepare(r, nil); err == nil || !strings.Contains(err.Error(), "names no rule") {
			t.Errorf("%+v: Prepare %v", r, err)
		}
	}
	// A rule anywhere under the query, or a data key, is enough.
	for _, r := range []*workflow.RegoPolicy{
		{Inline: "package agent\nallow if input.x"},
		{Inline: "package agent\ntools.ok := true", Query: "data.agent.tools.ok"},
		{Inline: "package agent\nx := 1", Query: "data.team", Data: map[string]string{"team": "a"}},
	} {
		if issues := check(t, r, nil); len(issues) != 0 {
			t.Errorf("%+v: issues %v", r, issues)
		}
	}
}

// TestDecideIsBounded: a policy that does not finish denies once the
// evaluation deadline passes instead of holding the tool call.
func TestDecideIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the evaluation deadline")
	}
	// 25 million iterations in constant memory: far past the deadline.
	d := decider(t, "package agent\nallow if { some i in numbers.range(1, 5000); some j in numbers.range(1, 5000); i * j == -1 }", nil, "")
	err := d.Decide(policy.Request{Tool: "env.read", Args: map[string]any{"key": "A"}})
	if err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("Decide = %v, want a failed evaluation", err)
	}
}
