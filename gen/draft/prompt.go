package draft

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/spec/reference"
	"github.com/kilnworks/kiln/gen"
)

// Limits on what goes back to the model in a repair round: enough to fix
// a draft, bounded whatever the draft was.
const (
	maxFedIssues  = 40
	maxIssueBytes = 600
)

// instructions is the fixed part of the system message.
const instructions = `You draft workflows for kiln. kiln compiles a workflow (a bounded DAG written in TOML) into a sealed, signed binary that can do nothing the workflow does not declare. A person reviews your draft before it is built; nothing you write is run now.

Reply with exactly one complete workflow in one fenced block (` + "```toml ... ```" + `) and nothing else.

Rules:
- Use only the node kinds, keys, triggers and auth kinds of the dialect reference below; kiln rejects unknown keys.
- Give the workflow a name, at least one [[start_nodes]] entry and [[edges]] between [[nodes]]; every node must be reachable.
- The workflow must be one self-contained file: declare no other file (no prompt or schema files, no child workflows, no input_schema, no JWKS file, no [policy.rego] file) and no [signing] block.
- Declare a [policy] block that allows only what the goal needs, with the narrowest patterns that work: a workflow without [policy] may do anything, and kiln refuses such a draft when a ceiling is set.

The shape of a workflow (the reference below lists every node kind and its keys):

` + "```toml\n" + Skeleton + "```" + `
`

// Skeleton is the shape of a workflow shown to the model: the top-level
// keys, start nodes, nodes, edges and policy tables the generated
// reference does not spell out. TestSkeletonIsValid keeps it valid.
const Skeleton = `name = "example"
description = "what the workflow does"

# How runs start: a manual run (kiln run, the sealed binary), or "http" and
# "event" for [[http_routes]] and internal events; [[triggers]] name one too.
[[start_nodes]]
name = "main"
source = "manual"
entry_node = "read"

[[nodes]]
id = "read"
type = "read_file"
path_from = "trigger.path"   # a context path: trigger.* or <node id>.<output field>

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "read"
to = "done"
# when = "error" follows a branch; max_iterations = N makes a bounded loop

# Deny by default: only what these tables allow. Patterns: exact, "prefix*",
# "dir/*" or "dir/**" (dir and below), "*" (anything).
[policy.fs]
read = ["/srv/in/**"]
# also: write, delete, list
# [policy.env] read_keys = [...]; [policy.http] urls = [...], methods = ["GET"];
# [policy.shell] commands = ["/abs/path"]; [policy.mcp] servers, tools, resources

# Optional limits per run (0 = unlimited).
[budget]
max_run_time_secs = 60
`

// Messages builds the first request of a draft: the instructions, the
// dialect reference generated from the catalog (the text of
// docs/reference.md) and the constraints in the system message, the goal
// as the user's.
func Messages(goal string, c Constraints) []intel.Message {
	var sys strings.Builder
	sys.WriteString(instructions)
	sys.WriteString("\n## Constraints\n\n")
	sys.WriteString(constraintsText(c))
	sys.WriteString("\n## Dialect reference\n\n")
	sys.Write(reference.Markdown())
	return []intel.Message{
		{Role: "system", Content: sys.String()},
		{Role: "user", Content: "Goal:\n" + goal},
	}
}

// constraintsText states the families the profile allows and the policy
// ceiling, so the model can stay inside them.
func constraintsText(c Constraints) string {
	var b strings.Builder
	if c.Profile == nil {
		b.WriteString("- Capability families: any.\n")
	} else {
		var allowed, denied []string
		for _, id := range catalog.IDs() {
			if c.Profile.Allows(id) {
				allowed = append(allowed, id)
			} else {
				denied = append(denied, id)
			}
		}
		fmt.Fprintf(&b, "- Capability families (profile %q): only %s. Do not use any node kind, trigger, route or block of %s.\n",
			c.Profile.Name, strings.Join(allowed, ", "), strings.Join(denied, ", "))
	}
	if c.Ceiling == nil {
		b.WriteString("- Policy ceiling: none given; still allow only what the goal needs.\n")
	} else {
		var buf bytes.Buffer
		_ = toml.NewEncoder(&buf).Encode(struct {
			Policy any `toml:"policy"`
		}{c.Ceiling.Policy})
		b.WriteString("- Policy ceiling: the [policy] block must allow nothing beyond this one (patterns equal to or inside these):\n\n```toml\n")
		b.Write(buf.Bytes())
		b.WriteString("```\n")
	}
	return b.String()
}

// RepairMessages is the request of a repair round: the first request, the
// model's last reply and what kiln found wrong with it.
func RepairMessages(first []intel.Message, reply string, findings []Finding) []intel.Message {
	var b strings.Builder
	b.WriteString("kiln did not accept this draft. Fix every issue below and reply with the complete corrected workflow in one ```toml block.\n\n")
	b.WriteString("Issues (code, line in your TOML, message):\n")
	for i, f := range findings {
		if i == maxFedIssues {
			fmt.Fprintf(&b, "- ... and %d more\n", len(findings)-i)
			break
		}
		line := "-"
		if f.Line > 0 {
			line = fmt.Sprintf("line %d", f.Line)
		}
		fmt.Fprintf(&b, "- %s (%s): %s\n", f.Code, line, clip(f.Message, maxIssueBytes))
	}
	msgs := append([]intel.Message(nil), first...)
	return append(msgs, intel.Message{Role: "assistant", Content: reply}, intel.Message{Role: "user", Content: b.String()})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..." // never half a character
}

// Constraints bound what a draft may ask for.
type Constraints struct {
	Profile *gen.Profile // nil: every family
	Ceiling *Ceiling     // nil: no policy ceiling
}
