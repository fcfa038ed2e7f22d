// Package draft is kiln's goal mode: it asks an intelligence backend for a
// workflow that reaches a goal, holds every reply to kiln's own loader,
// validator and planner and to the caller's constraints (a capability
// profile, a policy ceiling), feeds what is wrong back for a bounded number
// of repair rounds, and returns a draft only when it passes, with a review
// summary for the person who approves it. Nothing is run: a draft is
// loaded, validated and planned, never executed. See docs/goal-mode.md.
package draft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/internal/tomlkeys"
	gneeds "github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Bounds on the input and on the work one draft may cause.
const (
	MaxGoalBytes  = 16 << 10
	MaxDraftBytes = 1 << 20
	MaxRepairs    = 10
	// DefaultMaxTokens is the completion cap asked for when Options has
	// none: a workflow of a few dozen nodes fits.
	DefaultMaxTokens = 8192
)

// Options is one drafting session.
type Options struct {
	Goal   string
	Client intel.Client
	// Model is the request's model field: "default" for the --intel-*
	// transport, else the backend's name.
	Model     string
	MaxTokens int
	// Repairs is how many times issues are fed back after the first
	// reply (0..MaxRepairs).
	Repairs     int
	Constraints Constraints
	Catalogs    []*gneeds.Catalog // --needs catalogs
	// Name is the file name the draft will have; it replaces the
	// temporary path in messages.
	Name string
	// Log, when set, gets one line per round.
	Log io.Writer
}

// Finding is one reason a reply was not accepted, as fed back to the
// model: a validation code (docs/validation-codes.md), a draft code
// (draft_*) or parse_error, with the line in the reply's TOML when known.
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	// Refusal marks a constraint (profile, ceiling) rather than an
	// invalid workflow.
	Refusal bool `json:"refusal,omitempty"`
}

// Finding codes of drafting itself (the validator's are in
// docs/validation-codes.md).
const (
	CodeNoTOML          = "draft_no_toml"
	CodeTooLarge        = "draft_too_large"
	CodeDeclaresFile    = "draft_declares_file"
	CodeSigning         = "draft_signing"
	CodeFamilyForbidden = "draft_family_forbidden"
	CodePolicyBroader   = "draft_policy_broader"
	CodeNeedsConflict   = "needs_conflict"
	CodeParse           = "parse_error"
)

// Result is an accepted draft.
type Result struct {
	// TOML is the file to write: the comment header, then the model's
	// workflow exactly as validated.
	TOML     []byte
	Workflow *workflow.Workflow
	Plan     *gen.Plan
	Review   *Review
	Rounds   int // model calls made
	Usage    intel.Usage
}

// Failure is a drafting session that produced no acceptable workflow.
type Failure struct {
	Rounds   int
	Findings []Finding // of the last reply
	Refused  bool      // the last reply was valid but beyond the constraints
}

func (e *Failure) Error() string {
	var b strings.Builder
	if e.Refused {
		fmt.Fprintf(&b, "the draft was refused after %d round(s): it asks for more than the constraints allow", e.Rounds)
	} else {
		fmt.Fprintf(&b, "the draft never validated after %d round(s)", e.Rounds)
	}
	for i, f := range e.Findings {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Findings)-i)
			break
		}
		fmt.Fprintf(&b, "; %s", f.Code)
		if f.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", f.Line)
		}
		fmt.Fprintf(&b, ": %s", f.Message)
	}
	return b.String()
}

// Draft runs the session: one request, then up to opts.Repairs repair
// rounds while the reply is not accepted. An error from the backend ends
// the session at once; a reply that is never accepted is a *Failure.
func Draft(ctx context.Context, opts Options) (*Result, error) {
	switch {
	case strings.TrimSpace(opts.Goal) == "":
		return nil, errors.New("the goal is empty")
	case len(opts.Goal) > MaxGoalBytes:
		return nil, fmt.Errorf("the goal is %d bytes; at most %d", len(opts.Goal), MaxGoalBytes)
	case opts.Repairs < 0 || opts.Repairs > MaxRepairs:
		return nil, fmt.Errorf("repairs must be 0..%d, got %d", MaxRepairs, opts.Repairs)
	case opts.Client == nil:
		return nil, errors.New("no intelligence backend")
	}
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	if opts.Model == "" {
		opts.Model = "default"
	}
	if opts.Name == "" {
		opts.Name = "draft.toml"
	}
	first := Messages(opts.Goal, opts.Constraints)
	msgs := first
	var usage intel.Usage
	var last []Finding
	for round := 1; round <= opts.Repairs+1; round++ {
		res, err := opts.Client.Complete(ctx, &intel.Request{Model: opts.Model, Messages: msgs, MaxTokens: opts.MaxTokens})
		if err != nil {
			return nil, fmt.Errorf("round %d: intelligence backend: %w", round, err)
		}
		usage.PromptTokens += res.Usage.PromptTokens
		usage.CompletionTokens += res.Usage.CompletionTokens
		out, findings := accept(opts, res.Content)
		if out != nil {
			out.Rounds, out.Usage, out.Review.Rounds = round, usage, round
			logf(opts.Log, "round %d: accepted", round)
			return out, nil
		}
		logf(opts.Log, "round %d: %d issue(s), first %s", round, len(findings), findings[0].Code)
		last = findings
		msgs = RepairMessages(first, clip(res.Content, MaxDraftBytes), findings)
	}
	refused := true
	for _, f := range last {
		refused = refused && f.Refusal
	}
	return nil, &Failure{Rounds: opts.Repairs + 1, Findings: last, Refused: refused}
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "kiln draft: "+format+"\n", args...)
	}
}

// accept holds one reply to every check; it returns the accepted draft or
// why not (at least one finding).
func accept(opts Options, reply string) (*Result, []Finding) {
	body, ok := Extract(reply)
	if !ok {
		return nil, []Finding{{Code: CodeNoTOML, Message: "the reply holds no workflow: send one ```toml block"}}
	}
	if len(body) > MaxDraftBytes {
		return nil, []Finding{{Code: CodeTooLarge, Message: fmt.Sprintf("the workflow is %d bytes; at most %d", len(body), MaxDraftBytes)}}
	}
	header := Header(opts.Goal)
	text := header + body
	shift := headerLines(header)

	// Decode first: it reads no file, so what the draft declares can be
	// refused before the loader would read it.
	wf, err := gen.Decode(opts.Name, []byte(text))
	if err != nil {
		return nil, []Finding{parseFinding(err, shift)}
	}
	ix := tomlkeys.Scan(body)
	if f := selfContained(wf, ix); len(f) > 0 {
		return nil, f
	}
	if f := notLoaded(wf, ix); len(f) > 0 {
		return nil, f
	}

	// kiln's own loader and validator, from a private directory that only
	// ever holds this one file.
	dir, err := os.MkdirTemp("", "kiln-draft-")
	if err != nil {
		return nil, []Finding{{Code: CodeParse, Message: "cannot stage the draft: " + err.Error()}}
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return nil, []Finding{{Code: CodeParse, Message: "cannot stage the draft: " + err.Error()}}
	}
	decoded := wf
	wf, err = gen.Load(path, gen.LoadOptions{})
	if err != nil {
		var ve *gen.ValidationError
		if errors.As(err, &ve) {
			return nil, issueFindings(ve.Issues, decoded, ix, path, opts.Name)
		}
		return nil, []Finding{parseFinding(renamed(err, path, opts.Name), shift)}
	}
	// Defence in depth: selfContained must have stopped any declared
	// file; if the loader read one anyway, refuse rather than go on.
	if len(wf.Assets) > 0 || len(wf.Children) > 0 {
		return nil, []Finding{{Code: CodeDeclaresFile, Message: "the draft declares files; a draft must be one self-contained file"}}
	}
	// Both constraints are checked, so one round reports every refusal.
	var refusals []Finding
	plan, err := gen.NewPlan(wf, gen.PlanOptions{Catalogs: opts.Catalogs, Profile: opts.Constraints.Profile})
	if err != nil {
		refusals = planFindings(err)
	}
	for _, b := range opts.Constraints.Ceiling.Broader(wf.Policy) {
		refusals = append(refusals, Finding{Code: CodePolicyBroader, Line: ix.Lookup("policy").Line, Refusal: true,
			Message: b + " (policy ceiling " + opts.Constraints.Ceiling.File + ")"})
	}
	if len(refusals) > 0 {
		return nil, refusals
	}
	review := newReview(opts, wf, plan, path)
	return &Result{TOML: []byte(text), Workflow: wf, Plan: plan, Review: review}, nil
}

// selfContained refuses a draft that declares any file the loader would
// read (child workflows, prompt and schema files, input schemas, JWKS
// files, a Rego policy file, a signing key): those paths would be resolved
// on this machine, so a reply could make kiln read local files and quote
// them back to the backend.
func selfContained(wf *workflow.Workflow, ix tomlkeys.Index) []Finding {
	var out []Finding
	add := func(where, what, p string) {
		out = append(out, Finding{Code: CodeDeclaresFile, Line: ix.Lookup(where).Line,
			Message: fmt.Sprintf("%s declares the file %q (%s): a draft must be one self-contained file; inline it or leave it out", where, p, what)})
	}
	for i := range wf.Nodes {
		n := &wf.Nodes[i]
		k, ok := all.Kind(n.Type)
		if !ok {
			continue // the validator names an unknown kind
		}
		where := tomlkeys.JoinIndex("nodes", i)
		if k.Files != nil {
			for _, p := range k.Files(n) {
				if p != "" {
					add(where, "a file "+n.Type+" reads", p)
				}
			}
		}
		if k.Children != nil {
			for _, ch := range k.Children(n) {
				if ch.Path != "" {
					add(where, "a child workflow", ch.Path)
				}
			}
		}
	}
	for i, r := range wf.HTTPRoutes {
		if r.InputSchema != "" {
			add(tomlkeys.JoinIndex("http_routes", i), "an input schema", r.InputSchema)
		}
	}
	if wf.Auth != nil {
		for name, o := range wf.Auth.OIDC {
			if o.JWKSFile != "" {
				add("auth.oidc."+name, "a JWKS file", o.JWKSFile)
			}
		}
	}
	if wf.Policy != nil && wf.Policy.Rego != nil && wf.Policy.Rego.File != "" {
		add("policy.rego", "a Rego policy", wf.Policy.Rego.File)
	}
	if wf.Signing != nil {
		out = append(out, Finding{Code: CodeSigning, Line: ix.Lookup("signing").Line,
			Message: "[signing]: a draft is unsigned; the person who approves it signs it (kiln sign-workflow); remove the block"})
	}
	return out
}

// notLoaded is the second guard before the loader: the validator, run on
// the decoded tables (it reads nothing), reports not_loaded for every file
// the workflow declares, so a kind of file selfContained does not know yet
// is refused too rather than read.
func notLoaded(wf *workflow.Workflow, ix tomlkeys.Index) []Finding {
	var ve *gen.ValidationError
	if err := gen.Validate(wf); !errors.As(err, &ve) {
		return nil
	}
	var out []Finding
	for _, is := range ve.Issues {
		if is.Code == "not_loaded" || strings.HasSuffix(is.Message, "was not loaded (load the workflow with gen.Load)") {
			out = append(out, Finding{Code: CodeDeclaresFile, Line: issueLine(is.Message, wf, ix),
				Message: is.Message + ": a draft must be one self-contained file; inline it or leave it out"})
		}
	}
	return out
}

// parseFinding turns a load error into a finding with the line in the
// model's TOML (the header lines taken off).
func parseFinding(err error, shift int) Finding {
	var pe *gen.ParseError
	if errors.As(err, &pe) {
		f := Finding{Code: CodeParse, Message: pe.Msg}
		if pe.Key != "" {
			f.Message = pe.Key + ": " + pe.Msg
		}
		if pe.Line > shift {
			f.Line = pe.Line - shift
		}
		return f
	}
	return Finding{Code: CodeParse, Message: err.Error()}
}

// renamed replaces the staging path with the draft's name in a message.
func renamed(err error, path, name string) error {
	var pe *gen.ParseError
	if errors.As(err, &pe) {
		c := *pe
		c.File = name
		return &c
	}
	return errors.New(strings.ReplaceAll(err.Error(), path, name))
}

// issueFindings gives each validation issue the line of the node, edge or
// table it names, when it names one.
func issueFindings(issues []gen.Issue, wf *workflow.Workflow, ix tomlkeys.Index, path, name string) []Finding {
	out := make([]Finding, 0, len(issues))
	for _, is := range issues {
		f := Finding{Code: is.Code, Message: strings.ReplaceAll(is.Message, path, name)}
		f.Line = issueLine(is.Message, wf, ix)
		out = append(out, f)
	}
	return out
}

// edgeRef is how the validator names an edge: by its index in [[edges]].
var edgeRef = regexp.MustCompile(`^edge (\d+) \(`)

// issueLine finds where an issue points: the first node whose label
// (node "id") the message quotes, else a [table] it names.
func issueLine(msg string, wf *workflow.Workflow, ix tomlkeys.Index) int {
	if wf != nil {
		for i := range wf.Nodes {
			if strings.Contains(msg, fmt.Sprintf("node %q", wf.Nodes[i].ID)) {
				return ix.Lookup(tomlkeys.JoinIndex("nodes", i)).Line
			}
		}
	}
	if m := edgeRef.FindStringSubmatch(msg); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil {
			if p, ok := ix.Find(tomlkeys.JoinIndex("edges", i)); ok {
				return p.Line
			}
		}
	}
	if strings.HasPrefix(msg, "[") {
		if end := strings.IndexByte(msg, ']'); end > 1 {
			if p, ok := ix.Find(strings.Trim(msg[1:end], "[]")); ok {
				return p.Line
			}
		}
	}
	return 0
}

// planFindings turns a planning refusal into findings.
func planFindings(err error) []Finding {
	var capErr *gen.CapabilityError
	var conflict *gneeds.ConflictError
	switch {
	case errors.As(err, &capErr):
		var out []Finding
		for _, fam := range capErr.Families {
			out = append(out, Finding{Code: CodeFamilyForbidden, Refusal: true,
				Message: fmt.Sprintf("family %s is not allowed by profile %q (needed by %s)", fam, capErr.Profile, strings.Join(capErr.Why, "; "))})
		}
		if len(out) == 0 {
			out = append(out, Finding{Code: CodeFamilyForbidden, Refusal: true, Message: capErr.Error()})
		}
		return out
	case errors.As(err, &conflict):
		return []Finding{{Code: CodeNeedsConflict, Message: conflict.Error()}}
	}
	return []Finding{{Code: CodeParse, Message: err.Error()}}
}
