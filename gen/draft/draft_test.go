package draft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/internal/tomlkeys"
	gneeds "github.com/kilnworks/kiln/gen/needs"
)

// scripted is an in-process backend: it answers with replies in order and
// keeps every request.
type scripted struct {
	mu       sync.Mutex
	replies  []string
	requests []*intel.Request
}

func (s *scripted) Complete(_ context.Context, req *intel.Request) (*intel.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	if len(s.replies) == 0 {
		return nil, errors.New("script exhausted")
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return &intel.Response{Content: r, Usage: intel.Usage{PromptTokens: 10, CompletionTokens: 5}}, nil
}

func (s *scripted) text(i int) string {
	var b strings.Builder
	for _, m := range s.requests[i].Messages {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// greetTOML reads USER, renders a greeting and writes it under out.
func greetTOML(out string) string {
	return fmt.Sprintf(`name = "greet"
description = "write a greeting for $USER"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "user"

[[nodes]]
id = "user"
type = "read_env"
key = "USER"

[[nodes]]
id = "greeting"
type = "template_render"
template = "Hello, {{value}}!\n"
input_from = "user"

[[nodes]]
id = "where"
type = "template_render"
template = %q

[[nodes]]
id = "save"
type = "write_file"
path_from = "where.rendered"
content_from = "greeting.rendered"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "user"
to = "greeting"

[[edges]]
from = "greeting"
to = "where"

[[edges]]
from = "where"
to = "save"

[[edges]]
from = "save"
to = "done"

[policy.env]
read_keys = ["USER"]

[policy.fs]
write = [%q]
`, filepath.Join(out, "hello.txt"), out+"/**")
}

func fenced(s string) string { return "Here is the workflow:\n\n```toml\n" + s + "```\n" }

func TestValidFirstTurn(t *testing.T) {
	out := t.TempDir()
	be := &scripted{replies: []string{fenced(greetTOML(out))}}
	res, err := Draft(context.Background(), Options{Goal: "greet the user in a file", Client: be, Repairs: 2, Name: "greet.toml"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds != 1 || len(be.requests) != 1 {
		t.Fatalf("rounds %d, requests %d; want 1", res.Rounds, len(be.requests))
	}
	if !strings.HasPrefix(string(res.TOML), Header("greet the user in a file")) || !strings.HasSuffix(string(res.TOML), greetTOML(out)) {
		t.Fatalf("the draft must be the header then the reply's TOML:\n%s", res.TOML)
	}
	req := be.requests[0]
	if req.Model != "default" || req.MaxTokens != DefaultMaxTokens {
		t.Fatalf("request model %q max_tokens %d", req.Model, req.MaxTokens)
	}
	if text := be.text(0); !strings.Contains(text, "greet the user in a file") || !strings.Contains(text, "# Workflow dialect reference") || !strings.Contains(text, "### write_file") {
		t.Fatal("the request must carry the goal and the generated dialect reference")
	}
	// The draft as written loads and validates with kiln's own loader.
	p := filepath.Join(t.TempDir(), "greet.toml")
	os.WriteFile(p, res.TOML, 0o644)
	if _, err := gen.Load(p, gen.LoadOptions{}); err != nil {
		t.Fatalf("the written draft does not load: %v", err)
	}
	if res.Usage.PromptTokens != 10 || res.Usage.CompletionTokens != 5 {
		t.Fatalf("usage %+v", res.Usage)
	}
}

// An invalid first draft is repaired from the issues fed back: the second
// request quotes the codes and lines kiln found.
func TestInvalidFirstDraftRepaired(t *testing.T) {
	out := t.TempDir()
	good := greetTOML(out)
	bad := strings.Replace(good, `type = "template_render"`, `type = "render_template"`, 1)
	bad = strings.Replace(bad, `to = "done"`, `to = "nowhere"`, 1)
	be := &scripted{replies: []string{fenced(bad), fenced(good)}}
	res, err := Draft(context.Background(), Options{Goal: "greet", Client: be, Repairs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds != 2 || res.Review.Rounds != 2 {
		t.Fatalf("rounds %d", res.Rounds)
	}
	second := be.requests[1].Messages
	last := second[len(second)-1].Content
	for _, want := range []string{"unknown_node_type (line 14)", "render_template", "dangling_edge (line 47)", "nowhere"} {
		if !strings.Contains(last, want) {
			t.Errorf("the repair request lacks %q:\n%s", want, last)
		}
	}
	if second[len(second)-2].Role != "assistant" || !strings.Contains(second[len(second)-2].Content, "render_template") {
		t.Fatal("the repair request must carry the rejected draft as the assistant's turn")
	}
	if !strings.Contains(second[0].Content, "# Workflow dialect reference") {
		t.Fatal("the repair request must keep the reference")
	}
}

func TestNeverValidates(t *testing.T) {
	bad := fenced("name = \"x\"\n[[nodes]]\nid = \"a\"\ntype = \"nope\"\n")
	be := &scripted{replies: []string{bad, bad, bad, bad}}
	_, err := Draft(context.Background(), Options{Goal: "g", Client: be, Repairs: 2})
	var fail *Failure
	if !errors.As(err, &fail) || fail.Refused || fail.Rounds != 3 {
		t.Fatalf("want a Failure after 3 rounds, got %v", err)
	}
	if len(be.requests) != 3 {
		t.Fatalf("%d requests; the repairs must stop at 1+2", len(be.requests))
	}
	if !strings.Contains(err.Error(), "never validated") {
		t.Fatalf("message: %v", err)
	}
}

func TestParseErrorLineIsTheReplysLine(t *testing.T) {
	be := &scripted{replies: []string{fenced("name = \"x\"\n\nbogus_key = 1\n"), "I cannot.\n```\n```\n"}}
	_, err := Draft(context.Background(), Options{Goal: "line1\nline2\nline3", Client: be, Repairs: 1})
	var fail *Failure
	if !errors.As(err, &fail) {
		t.Fatal(err)
	}
	last := be.requests[1].Messages[len(be.requests[1].Messages)-1].Content
	if !strings.Contains(last, "parse_error (line 3)") || !strings.Contains(last, "bogus_key") {
		t.Fatalf("want the unknown key at line 3 of the reply, got:\n%s", last)
	}
	if fail.Findings[0].Code != CodeNoTOML {
		t.Fatalf("a reply with an empty fence: %+v", fail.Findings)
	}
}

// shell_run under a profile that forbids the shell family is refused, not
// accepted; the refusal is fed back, then the session fails as refused.
func TestProfileRefusesShell(t *testing.T) {
	prof, err := gen.DecodeProfile("pure.toml", []byte("name = \"pure\"\nallow = [\"control\", \"data\", \"fs\", \"env\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	shell := fenced(shellTOML(t, marker))
	be := &scripted{replies: []string{shell, shell}}
	_, err = Draft(context.Background(), Options{Goal: "touch a file", Client: be, Repairs: 1, Constraints: Constraints{Profile: prof}})
	var fail *Failure
	if !errors.As(err, &fail) || !fail.Refused {
		t.Fatalf("want a refusal, got %v", err)
	}
	shellRefused := false
	for _, f := range fail.Findings {
		shellRefused = shellRefused || (f.Code == CodeFamilyForbidden && strings.Contains(f.Message, "family shell"))
	}
	if !shellRefused {
		t.Fatalf("findings %+v", fail.Findings)
	}
	if !strings.Contains(be.text(0), `profile "pure"`) || !regexp.MustCompile(`only control, data, fs, env\. Do not use .*\bshell\b`).MatchString(be.text(0)) {
		t.Fatal("the first request must state the profile's families")
	}
	if !strings.Contains(be.text(1), CodeFamilyForbidden) {
		t.Fatal("the refusal must be fed back")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("drafting ran the shell node")
	}
}

// shellTOML runs a script that would create marker, then writes
// marker.written.
func shellTOML(t *testing.T, marker string) string {
	script := filepath.Join(t.TempDir(), "touch.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran > "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`name = "toucher"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "touch"

[[nodes]]
id = "touch"
type = "shell_run"
command = %q

[[nodes]]
id = "where"
type = "template_render"
template = "%s.written"

[[nodes]]
id = "write"
type = "write_file"
path_from = "where.rendered"
content_from = "touch.stdout"

[[edges]]
from = "touch"
to = "where"

[[edges]]
from = "touch"
to = "where"
when = "error"

[[edges]]
from = "where"
to = "write"

[policy.shell]
commands = [%q]

[policy.fs]
write = ["%s.written"]
`, script, marker, script, marker)
}

// Drafting performs no node: a draft with shell_run and write_file is
// accepted (no profile) and neither the command nor the write happened.
func TestNothingRuns(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	be := &scripted{replies: []string{fenced(shellTOML(t, marker))}}
	res, err := Draft(context.Background(), Options{Goal: "touch", Client: be})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Plan.Families, "shell") {
		t.Fatalf("families %v", res.Plan.Families)
	}
	for _, p := range []string{marker, marker + ".written"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("drafting ran a node: %s exists", p)
		}
	}
}

// A draft may not name files for the loader to read: their paths would be
// resolved on this machine and their contents could be quoted back to the
// backend. The schema file here is valid, so without the check the draft
// would be accepted.
func TestDraftDeclaringAFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "s.json")
	os.WriteFile(schema, []byte(`{"type":"object","description":"SECRET-MARKER-91"}`), 0o644)
	wf := fmt.Sprintf(`name = "asks"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "ask"

[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt = "hi"
output_schema = %q
`, schema)
	be := &scripted{replies: []string{fenced(wf), fenced(wf)}}
	_, err := Draft(context.Background(), Options{Goal: "g", Client: be, Repairs: 1})
	var fail *Failure
	if !errors.As(err, &fail) || fail.Findings[0].Code != CodeDeclaresFile || fail.Findings[0].Line != 8 {
		t.Fatalf("want %s at line 8, got %v", CodeDeclaresFile, err)
	}
	for i := range be.requests {
		if strings.Contains(be.text(i), "SECRET-MARKER") {
			t.Fatal("a local file's content reached the backend")
		}
	}
	// A Rego policy file: its compile errors would quote it.
	rego := filepath.Join(dir, "p.rego")
	os.WriteFile(rego, []byte("SECRET-MARKER-92 this is not rego\n"), 0o644)
	withRego := fenced(greetTOML(dir) + fmt.Sprintf("\n[policy.rego]\nfile = %q\n", rego))
	be = &scripted{replies: []string{withRego, withRego}}
	_, err = Draft(context.Background(), Options{Goal: "g", Client: be, Repairs: 1})
	if !errors.As(err, &fail) || fail.Findings[0].Code != CodeDeclaresFile || fail.Findings[0].Line == 0 {
		t.Fatalf("want %s with a line for [policy.rego] file, got %v", CodeDeclaresFile, err)
	}
	for i := range be.requests {
		if strings.Contains(be.text(i), "SECRET-MARKER") {
			t.Fatal("a local file's content reached the backend")
		}
	}
	signed := fenced(greetTOML(dir) + "\n[signing]\npublic_key_file = \"/etc/hostname\"\n")
	be = &scripted{replies: []string{signed}}
	_, err = Draft(context.Background(), Options{Goal: "g", Client: be})
	if !errors.As(err, &fail) || fail.Findings[0].Code != CodeSigning {
		t.Fatalf("want %s, got %v", CodeSigning, err)
	}
}

func TestCeilingRefusesBroaderPolicy(t *testing.T) {
	out := t.TempDir()
	ceil, err := DecodeCeiling("ceiling.toml", []byte("[policy.env]\nread_keys = [\"USER\"]\n[policy.fs]\nwrite = [\"/srv/out/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	be := &scripted{replies: []string{fenced(greetTOML(out))}}
	_, err = Draft(context.Background(), Options{Goal: "g", Client: be, Repairs: 0, Constraints: Constraints{Ceiling: ceil}})
	var fail *Failure
	if !errors.As(err, &fail) || !fail.Refused || fail.Findings[0].Code != CodePolicyBroader || !strings.Contains(fail.Findings[0].Message, out) {
		t.Fatalf("want a ceiling refusal naming %s, got %v", out, err)
	}
	if !strings.Contains(be.text(0), "/srv/out/**") {
		t.Fatal("the request must state the ceiling")
	}
	// Within the ceiling: accepted.
	ceil, _ = DecodeCeiling("ceiling.toml", []byte(fmt.Sprintf("[policy.env]\nread_keys = [\"*\"]\n[policy.fs]\nwrite = [%q]\n", out+"/**")))
	be = &scripted{replies: []string{fenced(greetTOML(out))}}
	res, err := Draft(context.Background(), Options{Goal: "g", Client: be, Constraints: Constraints{Ceiling: ceil}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Review.BeyondConstraints) != 0 || res.Review.Ceiling != "ceiling.toml" {
		t.Fatalf("review %+v", res.Review)
	}
}

// The goal is user text and lands in a TOML comment: a newline in it must
// not start a line of TOML.
func TestHeaderCannotInjectTOML(t *testing.T) {
	out := t.TempDir()
	goal := "greet\nname = \"evil\"\r\n[policy]\n\x00\u2028end"
	be := &scripted{replies: []string{fenced(greetTOML(out))}}
	res, err := Draft(context.Background(), Options{Goal: goal, Client: be})
	if err != nil {
		t.Fatal(err)
	}
	if res.Workflow.Name != "greet" {
		t.Fatalf("name %q: the goal leaked into the TOML", res.Workflow.Name)
	}
	h := Header(goal)
	for _, line := range strings.Split(strings.TrimSuffix(h, "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			t.Fatalf("header line %q is not a comment", line)
		}
	}
	if !strings.Contains(h, `# goal: "greet\nname = \"evil\"\r\n[policy]\n\x00\u2028end"`) {
		t.Fatalf("the goal must be quoted in the header:\n%s", h)
	}
	if !strings.Contains(h, "must be reviewed") {
		t.Fatal("the header must say the draft must be reviewed")
	}
}

func TestReviewListsNeedsAndFamilies(t *testing.T) {
	out := t.TempDir()
	be := &scripted{replies: []string{fenced(greetTOML(out))}}
	res, err := Draft(context.Background(), Options{Goal: "greet", Client: be, Name: "greet.toml"})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Review
	var fams []string
	for _, f := range r.Families {
		fams = append(fams, f.ID)
	}
	// Exactly these, plus any family every policy links.
	var rest []string
	for _, id := range fams {
		if f, _ := catalog.Lookup(id); !slices.Contains([]string{"control", "data", "fs", "env"}, id) && !f.Confines {
			rest = append(rest, id)
		}
	}
	if len(fams) < 4 || !slices.Equal(fams[:4], []string{"control", "data", "fs", "env"}) || rest != nil {
		t.Fatalf("families %v, want control, data, fs, env", fams)
	}
	var needs []string
	for _, n := range r.Needs.Needs {
		needs = append(needs, n.ID)
	}
	if want := []string{"capability:filesystem", "filesystem:" + out + ":rw"}; !slices.Equal(needs, want) {
		t.Fatalf("needs %v, want %v", needs, want)
	}
	text := string(r.Markdown())
	for _, want := range []string{
		"drafted by an intelligence backend", "greet the", "| fs | kiln\\_fs | node save (write\\_file) |",
		"| " + md("filesystem:"+out+":rw") + " | false |", "[policy.fs]", "user (read_env) -> greeting (template_render)",
		"done (terminate): end", "```mermaid\n", "flowchart TD", "Estimated sealed size", "an estimate, not a build", "No policy ceiling was given",
		"## Warnings (`kiln check --strict`)\n\nNone.",
	} {
		if want == "greet the" {
			want = "greet"
		}
		if !strings.Contains(text, want) {
			t.Errorf("review lacks %q:\n%s", want, text)
		}
	}
	if r.Size.Bytes < 3<<20 || r.Size.Bytes > 4<<20 {
		t.Fatalf("size estimate %d for control+data+fs+env", r.Size.Bytes)
	}
}

// A valid draft with a lint warning is written, and the review lists the
// warning `kiln check --strict` would refuse it for.
func TestReviewListsStrictWarnings(t *testing.T) {
	wf := `name = "branchy"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "check"

[[nodes]]
id = "check"
type = "condition"
expr = "trigger.go"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "check"
to = "done"
when = "true"

[policy]
`
	be := &scripted{replies: []string{fenced(wf)}}
	res, err := Draft(context.Background(), Options{Goal: "g", Client: be, Name: "b.toml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Review.Warnings) != 1 || res.Review.Warnings[0].Code != gen.WarnConditionBranch || !strings.Contains(res.Review.Warnings[0].Message, "b.toml") {
		t.Fatalf("warnings %+v", res.Review.Warnings)
	}
	if strings.Contains(res.Review.Warnings[0].Message, "kiln-draft-") {
		t.Fatal("the staging path leaked into the review")
	}
}

func TestSessionBounds(t *testing.T) {
	be := &scripted{}
	for _, o := range []Options{
		{Goal: " ", Client: be},
		{Goal: strings.Repeat("x", MaxGoalBytes+1), Client: be},
		{Goal: "g", Client: be, Repairs: MaxRepairs + 1},
		{Goal: "g", Client: be, Repairs: -1},
		{Goal: "g"},
	} {
		if _, err := Draft(context.Background(), o); err == nil {
			t.Errorf("want an error for %+v", o.Repairs)
		}
	}
	if len(be.requests) != 0 {
		t.Fatal("a refused session must not call the backend")
	}
	big := fenced("name = \"x\"\n" + strings.Repeat("# pad\n", MaxDraftBytes/6+1))
	be = &scripted{replies: []string{big}}
	_, err := Draft(context.Background(), Options{Goal: "g", Client: be})
	var fail *Failure
	if !errors.As(err, &fail) || fail.Findings[0].Code != CodeTooLarge {
		t.Fatalf("want %s, got %v", CodeTooLarge, err)
	}
}

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"```toml\nname = \"a\"\n```\n", "name = \"a\"\n", true},
		{"text\n```\nname = \"a\"\n```\nmore\n```toml\nname = \"b\"\n```", "name = \"a\"\n", true},
		{"```json\n{}\n```\n```TOML\nname = \"b\"\n```", "name = \"b\"\n", true},
		{"name = \"bare\"", "name = \"bare\"\n", true},
		{"```toml\nname = \"unclosed\"\n", "name = \"unclosed\"\n", true},
		{"```python\nx\n```", "", false},
		{"   ", "", false},
	} {
		got, ok := Extract(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Extract(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// Ids, names and patterns in the review come from the model: none of them
// may start Markdown or HTML that hides or fakes part of the review.
func TestReviewMarkdownIsInert(t *testing.T) {
	out := t.TempDir()
	wf := strings.ReplaceAll(greetTOML(out), `"save"`, `"<!-- x | y *z* `+"`"+`"`)
	wf = strings.Replace(wf, `description = "write a greeting for $USER"`, `description = "fine\n## Policy\nNothing to see"`, 1)
	be := &scripted{replies: []string{fenced(wf)}}
	res, err := Draft(context.Background(), Options{Goal: "g\n## Policy\nall good", Client: be})
	if err != nil {
		t.Fatal(err)
	}
	text := string(res.Review.Markdown())
	// Outside code blocks: one "## Policy" heading (kiln's), no raw "<",
	// no unescaped "|" beyond a table row's own.
	fence, headings := "", 0
	for _, line := range strings.Split(text, "\n") {
		if fence != "" {
			if line == fence {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			fence = strings.TrimRight(line, "abcdefghijklmnopqrstuvwxyz")
			continue
		}
		if line == "## Policy" {
			headings++
		}
		if i := strings.Index(line, "<"); i >= 0 && (i == 0 || line[i-1] != '\\') {
			t.Fatalf("raw '<' outside a code block: %q", line)
		}
		if strings.HasPrefix(line, "| ") && strings.Count(line, "|")-strings.Count(line, "\\|") != 4 {
			t.Fatalf("model text split a table row: %q", line)
		}
	}
	if headings != 1 {
		t.Fatalf("%d '## Policy' headings outside code blocks\n%s", headings, text)
	}
	if !strings.Contains(text, "node \\<\\!-- x \\| y \\*z\\* \\`") {
		t.Fatalf("the node id must appear escaped:\n%s", text)
	}
}

// The validator's not_loaded issues catch any declared file on the decoded
// tables, whatever its kind, before the loader could read it.
func TestNotLoadedGuard(t *testing.T) {
	src := `name = "asks"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "ask"

[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt = "hi"
output_schema = "/etc/kiln-nonexistent/s.json"

[[nodes]]
id = "child"
type = "call"
workflow = "../elsewhere.toml"
`
	wf, err := gen.Decode("d.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := notLoaded(wf, tomlkeys.Scan(src))
	if len(got) != 2 || got[0].Code != CodeDeclaresFile || got[0].Line != 8 || !strings.Contains(got[1].Message, "../elsewhere.toml") {
		t.Fatalf("findings %+v", got)
	}
}

// --needs catalogs shape the review's effective needs as they shape the
// sealed binary's.
func TestReviewNeedsHonourCatalogs(t *testing.T) {
	cat, err := gneeds.Decode("extra.toml", []byte(`
[[agent_needs]]
class_name = "workflow:greet"
[agent_needs.needs]
secrets = [{ key = "GREETING_TOKEN", label = "token", optional = true }]
`))
	if err != nil {
		t.Fatal(err)
	}
	be := &scripted{replies: []string{fenced(greetTOML(t.TempDir()))}}
	res, err := Draft(context.Background(), Options{Goal: "g", Client: be, Catalogs: []*gneeds.Catalog{cat}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range res.Review.Needs.Needs {
		found = found || (n.ID == "secret:GREETING_TOKEN" && n.Optional)
	}
	if !found || !strings.Contains(string(res.Review.Markdown()), "secret:GREETING\\_TOKEN | true |") {
		t.Fatalf("the catalog's need is missing: %+v", res.Review.Needs)
	}
}

// A draft beyond both the profile and the ceiling hears about both in one
// round.
func TestBothRefusalsInOneRound(t *testing.T) {
	prof, _ := gen.DecodeProfile("p.toml", []byte("deny = [\"shell\"]\n"))
	ceil, _ := DecodeCeiling("c.toml", []byte("[policy.fs]\nwrite = [\"/nowhere/**\"]\n"))
	be := &scripted{replies: []string{fenced(shellTOML(t, filepath.Join(t.TempDir(), "m")))}}
	_, err := Draft(context.Background(), Options{Goal: "g", Client: be, Constraints: Constraints{Profile: prof, Ceiling: ceil}})
	var fail *Failure
	if !errors.As(err, &fail) || !fail.Refused {
		t.Fatalf("want a refusal, got %v", err)
	}
	codes := map[string]bool{}
	for _, f := range fail.Findings {
		codes[f.Code] = true
	}
	if !codes[CodeFamilyForbidden] || !codes[CodePolicyBroader] {
		t.Fatalf("findings %+v", fail.Findings)
	}
}

// The skeleton shown to the model must itself be a valid workflow.
func TestSkeletonIsValid(t *testing.T) {
	wf, err := gen.Decode("skeleton.toml", []byte(Skeleton))
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Validate(wf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(Messages("g", Constraints{})[0].Content, Skeleton) {
		t.Fatal("the system message must show the skeleton")
	}
}
