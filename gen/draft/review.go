package draft

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/graph"
	rneeds "github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Review is what the person who approves a draft reads: what the workflow
// does, what it links, what it needs and what it may touch. It is written
// beside the draft as WF.review.md and printed by --json.
type Review struct {
	Draft       string `json:"draft"`
	Workflow    string `json:"workflow"`
	Description string `json:"description,omitempty"`
	Goal        string `json:"goal"`
	Rounds      int    `json:"rounds"`
	// Graph is the workflow's graph as a text edge list; Mermaid the
	// same graph as a Mermaid flowchart (gen/graph), which code hosts
	// draw ("" if it could not be built).
	Graph   string `json:"graph"`
	Mermaid string `json:"graph_mermaid,omitempty"`
	// Families are the capability families the sealed binary links.
	Families []FamilyUse       `json:"families"`
	Needs    *rneeds.Effective `json:"needs"`
	// Policy is the declared [policy] block as TOML ("" when none).
	Policy         string `json:"policy"`
	PolicyDeclared bool   `json:"policy_declared"`
	// BeyondConstraints is what the policy allows beyond the ceiling
	// (always empty for a written draft: such a draft is refused) and
	// Broad what it allows widely enough to deserve a second look.
	BeyondConstraints []string     `json:"beyond_constraints"`
	Broad             []string     `json:"broad"`
	Profile           string       `json:"profile,omitempty"`
	Ceiling           string       `json:"ceiling,omitempty"`
	Size              SizeEstimate `json:"estimated_size"`
	// Warnings are what `kiln check --strict` would refuse.
	Warnings []gen.Warning `json:"warnings"`
}

// FamilyUse is one linked family and what needs it.
type FamilyUse struct {
	ID  string   `json:"id"`
	Tag string   `json:"tag"`
	Why []string `json:"why"`
}

func newReview(opts Options, wf *workflow.Workflow, plan *gen.Plan, stagedPath string) *Review {
	r := &Review{
		Draft:             opts.Name,
		Workflow:          wf.Name,
		Description:       wf.Description,
		Goal:              opts.Goal,
		Needs:             plan.Needs,
		PolicyDeclared:    wf.Policy != nil,
		BeyondConstraints: opts.Constraints.Ceiling.Broader(wf.Policy),
		Broad:             broad(wf.Policy),
		Size:              EstimateSize(plan.Families),
		Warnings:          lint(wf, stagedPath, opts.Name),
	}
	r.Graph = graphText(wf)
	if g, err := graph.Build(wf, graph.Options{Depth: 1, DeadEnds: gen.GraphDeadEnds}); err == nil {
		r.Mermaid = g.Mermaid()
	}
	if r.BeyondConstraints == nil {
		r.BeyondConstraints = []string{}
	}
	if r.Warnings == nil {
		r.Warnings = []gen.Warning{}
	}
	if opts.Constraints.Profile != nil {
		r.Profile = opts.Constraints.Profile.Name
	}
	if opts.Constraints.Ceiling != nil {
		r.Ceiling = opts.Constraints.Ceiling.File
	}
	for _, id := range plan.Families {
		f, _ := catalog.Lookup(id)
		why := plan.Usage.Why[id]
		if why == nil {
			why = []string{}
		}
		r.Families = append(r.Families, FamilyUse{ID: id, Tag: f.Tag, Why: why})
	}
	if wf.Policy != nil {
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(struct {
			Policy *workflow.Policy `toml:"policy"`
		}{wf.Policy}); err == nil {
			r.Policy = buf.String()
		}
	}
	return r
}

// lint returns the warnings `kiln check --strict` turns into issues, with
// the staging path replaced by the draft's name.
func lint(wf *workflow.Workflow, stagedPath, name string) []gen.Warning {
	ws := gen.Lint(wf)
	for i := range ws {
		ws[i].Message = strings.ReplaceAll(ws[i].Message, stagedPath, name)
	}
	return ws
}

// broad lists what a policy allows widely: no policy at all, or "*" and
// whole-tree patterns.
func broad(p *workflow.Policy) []string {
	if p == nil {
		return []string{"no [policy] block: the workflow may read and write any file, read any variable, call any URL, run any command and use any MCP tool"}
	}
	var out []string
	check := func(key string, list []string) {
		for _, pat := range list {
			switch {
			case pat == "*":
				out = append(out, fmt.Sprintf("[policy.%s]: \"*\" allows everything", key))
			case pat == "/**" || pat == "/*":
				out = append(out, fmt.Sprintf("[policy.%s]: %q allows every absolute path", key, pat))
			}
		}
	}
	if p.FS != nil {
		check("fs.read", p.FS.Read)
		check("fs.write", p.FS.Write)
		check("fs.delete", p.FS.Delete)
		check("fs.list", p.FS.List)
	}
	if p.Env != nil {
		check("env.read_keys", p.Env.ReadKeys)
	}
	if p.HTTP != nil {
		check("http.urls", p.HTTP.URLs)
	}
	if p.Shell != nil {
		check("shell.commands", p.Shell.Commands)
	}
	if p.MCP != nil {
		check("mcp.tools", p.MCP.Tools)
		check("mcp.resources", p.MCP.Resources)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// graphText draws the workflow as a text edge list: how runs start, then
// every edge with its branch label and loop bound, then the nodes with no
// way out.
func graphText(wf *workflow.Workflow) string {
	var b strings.Builder
	kind := map[string]string{}
	for _, n := range wf.Nodes {
		kind[n.ID] = n.Type
	}
	label := func(id string) string {
		if k, ok := kind[id]; ok {
			return fmt.Sprintf("%s (%s)", id, k)
		}
		return id
	}
	for _, s := range wf.StartNodes {
		src := s.Source
		if src == "" {
			src = "start"
		}
		fmt.Fprintf(&b, "start %s [%s] -> %s\n", s.Name, src, label(s.EntryNode))
	}
	out := map[string]bool{}
	for _, e := range wf.Edges {
		out[e.From] = true
		arrow := "->"
		switch {
		case e.When != "" && e.MaxIterations != nil:
			arrow = fmt.Sprintf("-[%s, loop at most %d]->", e.When, *e.MaxIterations)
		case e.When != "":
			arrow = fmt.Sprintf("-[%s]->", e.When)
		case e.MaxIterations != nil:
			arrow = fmt.Sprintf("-[loop at most %d]->", *e.MaxIterations)
		}
		fmt.Fprintf(&b, "%s %s %s\n", label(e.From), arrow, label(e.To))
	}
	for _, n := range wf.Nodes {
		if !out[n.ID] {
			fmt.Fprintf(&b, "%s: end\n", label(n.ID))
		}
	}
	return b.String()
}

// Markdown renders the review as WF.review.md.
func (r *Review) Markdown() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Review: draft %s (workflow %s)\n\n", md(r.Draft), md(r.Workflow))
	p("This workflow was **drafted by an intelligence backend** from the goal below, in %d round(s), ", r.Rounds)
	p("and has passed kiln's loader, validator and planner. Nothing in it has been run. ")
	p("Read it and this summary before building and signing it (`kiln build DRAFT -o BIN`).\n\n")
	p("Goal:\n\n%s\n", fence("text", r.Goal))
	if r.Description != "" {
		p("Description (the draft's own):\n\n%s\n", fence("text", r.Description))
	}
	p("## Graph\n\n")
	if r.Mermaid != "" {
		p("%s\n", fence("mermaid", r.Mermaid))
	}
	p("Edges as text (`start NAME [source] -> node`, `from -[branch]-> to`; `end` marks a node with no way out):\n\n%s\n", fence("text", r.Graph))

	p("## Capability families linked\n\n| family | build tag | needed by |\n| --- | --- | --- |\n")
	for _, f := range r.Families {
		p("| %s | %s | %s |\n", md(f.ID), md(f.Tag), md(strings.Join(f.Why, "; ")))
	}
	if r.Profile != "" {
		p("\nAll within profile %s.\n", md(r.Profile))
	}

	p("\n## Effective needs\n\nWhat the sealed binary will ask of the machine it runs on (the same list `kiln needs` prints).\n\n")
	if r.Needs == nil || len(r.Needs.Needs) == 0 {
		p("None.\n")
	} else {
		p("| need | optional | asked by |\n| --- | --- | --- |\n")
		for _, n := range r.Needs.Needs {
			p("| %s | %v | %s |\n", md(n.ID), n.Optional, md(strings.Join(n.Sources, ", ")))
		}
	}

	p("\n## Policy\n\n")
	if r.PolicyDeclared {
		p("Declared (deny by default; only this is allowed):\n\n%s\n", fence("toml", r.Policy))
	} else {
		p("**No [policy] block: the workflow may do anything its nodes can.**\n\n")
	}
	if r.Ceiling != "" {
		p("Policy ceiling %s: ", md(r.Ceiling))
		if len(r.BeyondConstraints) == 0 {
			p("the policy is within it.\n\n")
		} else {
			p("the policy goes beyond it:\n\n")
			for _, s := range r.BeyondConstraints {
				p("- %s\n", md(s))
			}
			p("\n")
		}
	} else {
		p("No policy ceiling was given.\n\n")
	}
	if len(r.Broad) > 0 {
		p("Broad grants to look at:\n\n")
		for _, s := range r.Broad {
			p("- %s\n", md(s))
		}
		p("\n")
	}

	p("## Estimated sealed size\n\nAbout %.1f MiB (%s).\n\n", float64(r.Size.Bytes)/(1<<20), r.Size.Basis)

	p("## Warnings (`kiln check --strict`)\n\n")
	if len(r.Warnings) == 0 {
		p("None.\n")
	} else {
		for _, w := range r.Warnings {
			p("- %s: %s\n", md(w.Code), md(w.Message))
		}
	}
	return b.Bytes()
}

// fence puts text in a code block whose fence no line of it can close.
func fence(info, text string) string {
	f := "```"
	for strings.Contains(text, f) {
		f += "`"
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return f + info + "\n" + text + f + "\n"
}

// mdSpecial are the characters that can start Markdown (and GitHub's
// extensions): code spans, emphasis, links and images, HTML and entities,
// table cells, headings, strikethrough, math.
const mdSpecial = "\\`*_[]<>|&#~$!"

// md makes text that came from the model (ids, names, patterns, paths)
// inert in Markdown: each special character is backslash-escaped, so no
// emphasis, link, code span, table cell or HTML comment can start, and
// line breaks become spaces, so no heading or list can. Without it a node
// id like "<!--" would hide the rest of the review.
func md(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029':
			b.WriteRune('\uFFFD')
		case strings.ContainsRune(mdSpecial, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
