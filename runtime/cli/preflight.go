package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/discovery"
	"github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Build is what the program knows about its own build: the effective
// needs it was generated with and the capability families it links. A
// sealed binary fills it from its embedded needs and manifest; `kiln run`
// computes it from the TOML at start. Nil (a test calling Main directly)
// skips preflight.
type Build struct {
	Needs *needs.Effective
	// Families maps each linked family id to the capability keys it
	// provides (discovery's capabilities block).
	Families map[string][]string
	// Degraded lists capability keys the workflow requires but this
	// binary does not provide (a --degrade build, or keys no family has).
	Degraded []string
	// Unprovided are node kinds a degraded build has no handler for: they
	// fail at dispatch with capability_not_provided.
	Unprovided []string
}

func (b *Build) unprovided() map[string]bool {
	if b == nil || len(b.Unprovided) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, k := range b.Unprovided {
		m[k] = true
	}
	return m
}

// preflightFlags are --approvals and --preflight.
type preflightFlags struct {
	approvals string
	mode      string
	report    bool            // the `needs` argument: print the report and exit
	sandbox   confine.Request // what confinement will cover (sandbox.go)
}

func definePreflightFlags(fs *flag.FlagSet, p *preflightFlags) {
	fs.StringVar(&p.approvals, "approvals", "", "operator approvals `file` (TOML: network, capabilities, [[filesystem]], [[oauth]]); without it the compiled [policy] is the approval")
	fs.StringVar(&p.mode, "preflight", "enforce", "`mode` of the start-up needs check: enforce (refuse to start while a mandatory need is unmet, exit 6) or warn; the argument `needs` prints the report and exits")
}

func (p *preflightFlags) check() error {
	if p.mode != "enforce" && p.mode != "warn" {
		return fmt.Errorf("--preflight %q: want enforce or warn", p.mode)
	}
	return nil
}

// preflight evaluates the build's needs. With the `needs` argument it
// prints the report on stdout and ends the process (0 ready or degraded,
// 6 blocked). Otherwise a blocked report ends it with 6 and the report on
// stderr, unless --preflight=warn. done is false when the run may go on.
func preflight(p *preflightFlags, o Options, audit *slog.Logger) (code int, done bool) {
	if !p.report && (o.Build == nil || o.Build.Needs == nil) {
		return 0, false // nothing declared, nothing to check
	}
	rep, err := evaluate(p, o)
	if err != nil {
		fmt.Fprintf(o.Stderr, "%s: %s\n", o.Prog, runtime.Redact(err.Error()))
		return ExitUsage, true
	}
	// The report is encoded, and the sandbox plan made for it, only when it
	// is printed (`needs`, or a blocked start); otherwise the plan matters
	// only when landlock = "required" can refuse.
	printed := p.report || rep.Status == needs.Blocked
	if p.sandbox.Workflow != nil && (printed || confine.MayRefuse(p.sandbox)) {
		rep.Sandbox = confine.Plan(p.sandbox)
		if rep.Sandbox.Refused != "" {
			rep.Status, printed = needs.Blocked, true // [sandbox] landlock = "required" cannot be met
		}
	}
	var out []byte
	if printed {
		if out, err = runtime.EncodeJSONIndent(rep); err != nil {
			fmt.Fprintf(o.Stderr, "%s: preflight report: %v\n", o.Prog, err)
			return ExitUsage, true
		}
		out = runtime.RedactJSON(out)
	}
	if p.report {
		fmt.Fprintf(o.Stdout, "%s\n", out)
		if rep.Status == needs.Blocked {
			return ExitBlocked, true
		}
		return ExitOK, true
	}
	unmet := unmetIDs(rep)
	if rep.Sandbox != nil && rep.Sandbox.Refused != "" {
		unmet = append(unmet, "sandbox ("+rep.Sandbox.Refused+")")
	}
	switch rep.Status {
	case needs.Ready:
		audit.Info("preflight.ready", "workflow", o.Workflow.Name, "needs", len(rep.Needs))
	case needs.Degraded:
		audit.Warn("preflight.degraded", "workflow", o.Workflow.Name, "unmet", strings.Join(unmet, ","),
			"degraded", strings.Join(o.Build.Degraded, ","))
	case needs.Blocked:
		if p.mode == "warn" {
			audit.Warn("preflight.blocked", "workflow", o.Workflow.Name, "unmet", strings.Join(unmet, ","),
				"detail", "--preflight=warn: starting anyway")
			return 0, false
		}
		audit.Error("preflight.blocked", "workflow", o.Workflow.Name, "unmet", strings.Join(unmet, ","))
		fmt.Fprintf(o.Stderr, "%s\n", out)
		fmt.Fprintf(o.Stderr, "%s: refusing to start: unmet needs %s (see `needs`; --preflight=warn starts anyway)\n",
			o.Prog, strings.Join(unmet, ", "))
		return ExitBlocked, true
	}
	return 0, false
}

// evaluate checks the build's needs against this machine.
func evaluate(p *preflightFlags, o Options) (*needs.Report, error) {
	b := o.Build
	if b == nil || b.Needs == nil {
		return &needs.Report{Status: needs.Ready, Needs: []needs.Item{}}, nil
	}
	env := needs.Env{
		HasSecret:     hasSecret(o.Workflow, o.Env),
		Capabilities:  func(typ string) bool { return !slices.Contains(b.Degraded, typ) },
		DegradedBuild: len(b.Degraded) > 0,
	}
	byPolicy := p.approvals == ""
	if byPolicy {
		env.Approvals = policyApprovals(b.Needs)
	} else {
		a, err := needs.LoadApprovals(p.approvals)
		if err != nil {
			return nil, fmt.Errorf("--approvals: %v", err)
		}
		env.Approvals = a
	}
	rep := needs.Evaluate(b.Needs, env)
	// The keys a degraded build leaves out are part of the report too:
	// visible, never silent (docs/needs.md), but they do not block the start.
	have := map[string]bool{}
	for _, it := range rep.Needs {
		have[it.ID] = true
	}
	for _, key := range b.Degraded {
		id := "capability:" + key
		if have[id] {
			continue
		}
		rep.Needs = append(rep.Needs, needs.Item{ID: id, Kind: needs.KindCapability, Label: "capability left out of this build",
			Source: []string{"workflow:" + o.Workflow.Name}, Optional: true, Status: needs.Unsupported,
			Action: &needs.Action{Type: "rebuild_with_capability", Capability: key},
			Detail: "nodes that need it fail with capability_not_provided"})
	}
	// sort.Slice, not slices.SortFunc: a generic sort of Item would add
	// about 18 KiB to every sealed binary.
	sort.Slice(rep.Needs, func(i, j int) bool { return rep.Needs[i].ID < rep.Needs[j].ID })
	if byPolicy {
		for i := range rep.Needs {
			it := &rep.Needs[i]
			if it.Status == needs.Satisfied && approvalKind(it.Kind) {
				it.Detail = "approved by the compiled [policy] (no --approvals file)"
			}
		}
	}
	return rep, nil
}

// approvalKind: needs an operator approves rather than provides.
func approvalKind(kind string) bool {
	return kind == needs.KindNetwork || kind == needs.KindFilesystem || kind == needs.KindCapability
}

// policyApprovals approves every network, filesystem and capability need:
// without an approvals file the compiled [policy] is the operator's
// approval. Needs beyond that policy stay unmet (Evaluate never lets an
// approval widen it); an approvals file, when given, replaces this and
// can only narrow it.
func policyApprovals(eff *needs.Effective) *needs.Approvals {
	a := &needs.Approvals{}
	for _, n := range eff.Needs {
		switch n.Kind {
		case needs.KindNetwork:
			a.Network = append(a.Network, n.Host)
		case needs.KindFilesystem:
			a.Filesystem = append(a.Filesystem, needs.FilesystemApproval{Path: n.Path, Mode: n.Mode})
		case needs.KindCapability:
			a.Capabilities = append(a.Capabilities, n.Type)
		}
	}
	return a
}

// hasSecret reports whether a secret key resolves: the environment
// variable of that name is set, or a [[secrets]] entry of that name has a
// source that resolves (its variable is set, its file is readable and not
// empty, its command exists, its OAuth2 client credentials are set). It
// never runs a command or fetches a token, and never returns a value.
func hasSecret(wf *workflow.Workflow, env func(string) string) func(string) bool {
	type entry struct {
		spec workflow.Secret
		dir  string
	}
	specs := map[string]entry{}
	for _, w := range workflow.Tree(wf) {
		for _, s := range w.Secrets {
			if _, ok := specs[s.Name]; !ok {
				dir := ""
				if w.Source != "" {
					dir = filepath.Dir(w.Source)
				}
				specs[s.Name] = entry{s, dir}
			}
		}
	}
	return func(key string) bool {
		if env(key) != "" {
			return true
		}
		e, ok := specs[key]
		if !ok {
			return false
		}
		s := e.spec
		switch s.Source {
		case "env":
			return env(s.Var) != ""
		case "file":
			p := s.Path
			if !filepath.IsAbs(p) && e.dir != "" {
				if cand := filepath.Join(e.dir, p); fileNotEmpty(cand) {
					return true
				}
			}
			return fileNotEmpty(p)
		case "command":
			if len(s.Argv) == 0 {
				return false
			}
			st, err := os.Stat(s.Argv[0])
			return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
		case "oauth2":
			return env(s.ClientIDEnv) != "" && env(s.ClientSecretEnv) != ""
		}
		return false
	}
}

func fileNotEmpty(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Size() > 0
}

func unmetIDs(r *needs.Report) []string {
	var out []string
	for _, it := range r.Needs {
		if it.Status != needs.Satisfied {
			out = append(out, it.ID)
		}
	}
	return out
}

// attachBuild publishes what discovery reports about this binary (the
// serve-mode /.well-known/kiln and /v1/agents documents).
func attachBuild(h *runtime.Host, o Options) {
	if o.Build == nil {
		return
	}
	discovery.Attach(h, discovery.Self{Version: o.Version, Families: o.Build.Families, Degraded: o.Build.Degraded})
}
