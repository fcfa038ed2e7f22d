package policy

import (
	"errors"
	"sync"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Request is one tool decision as an additional policy ([policy.rego])
// sees it: Tool is what a Denial names (fs.read, http.request, ...) and
// Args its tool-specific arguments (docs/policy.md lists them), each a
// string or, for shell.run's args, a []string.
type Request struct {
	Tool string
	Args map[string]any
}

// Decider is a decision taken after the static allowlist allows: nil
// allows, an error denies with its text as the reason. It must be safe
// for concurrent use.
type Decider interface {
	Decide(Request) error
}

// DeciderCompiler compiles a [policy.rego] block; files holds the files
// the workflow declares (workflow.Workflow.Assets). The rego family
// registers one; the runtime never links an evaluator itself.
type DeciderCompiler func(rego *workflow.RegoPolicy, files map[string][]byte) (Decider, error)

var (
	compilerMu sync.RWMutex
	compiler   DeciderCompiler
)

// RegisterRego installs the compiler of [policy.rego] blocks (the rego
// family does, from init).
func RegisterRego(c DeciderCompiler) {
	compilerMu.Lock()
	defer compilerMu.Unlock()
	compiler = c
}

// Compile compiles p like New and, when p declares [policy.rego], prepares
// it through the registered compiler, so a bad policy fails at start-up
// and never at the first request. A binary that does not link the rego
// family refuses such a policy.
func Compile(p *workflow.Policy, files map[string][]byte) (*Policy, error) {
	pol := New(p)
	if p == nil || p.Rego == nil {
		return pol, nil
	}
	compilerMu.RLock()
	c := compiler
	compilerMu.RUnlock()
	if c == nil {
		return nil, errors.New("[policy.rego] is declared but this binary does not link the rego capability family (build tag kiln_rego)")
	}
	d, err := c(p.Rego, files)
	if err != nil {
		return nil, err
	}
	pol.extra = d
	return pol, nil
}

// notCompiled denies everything: a Policy built by New from a block with
// [policy.rego] has not prepared it (fail closed).
type notCompiled struct{}

func (notCompiled) Decide(Request) error {
	return errors.New("[policy.rego] was not compiled (policy.Compile)")
}

// SourceRego marks a Denial of the [policy.rego] decision.
const SourceRego = "rego"

// decide consults the additional decision, if any, once the static
// allowlist allowed tool on target.
func (p *Policy) decide(tool, target string, args map[string]any) error {
	if p.extra == nil {
		return nil
	}
	if err := p.extra.Decide(Request{Tool: tool, Args: args}); err != nil {
		return &Denial{What: tool, Target: target, Reason: err.Error(), Source: SourceRego}
	}
	return nil
}
