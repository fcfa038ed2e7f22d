// Package spec declares the sandbox family's [sandbox] block: how a binary
// that has a [policy] confines itself with Landlock at start-up (see
// docs/sandbox.md). It holds data and checks only, so the generator links
// it without the family.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The values of [sandbox] landlock.
const (
	// BestEffort applies what the kernel supports and reports the rest.
	BestEffort = "best_effort"
	// Required refuses to start (exit 6) unless every kind of rule kiln
	// derives (file system, TCP ports, scoping) is enforced.
	Required = "required"
	// Off leaves the process unconfined, with a warning.
	Off = "off"
)

// Keys are the [sandbox] keys.
var Keys = []spec.Key{
	{Name: "landlock", Type: spec.String, Default: BestEffort,
		Doc: "best_effort, required or off: how a binary with a [policy] confines itself and its children with Landlock; without the block, only workflows that start child processes or reach the network are confined"},
}

// Family is the sandbox family's declaration.
var Family = spec.Family{
	ID:    "sandbox",
	Check: CheckSandbox,
}

// Mode returns the effective landlock mode of wf ("" in the block means
// best_effort).
func Mode(wf *workflow.Workflow) string {
	if wf == nil || wf.Sandbox == nil || wf.Sandbox.Landlock == "" {
		return BestEffort
	}
	return wf.Sandbox.Landlock
}

// CheckSandbox checks the [sandbox] block.
func CheckSandbox(wf *workflow.Workflow, _ spec.Context) []spec.Issue {
	var is spec.Issues
	if wf.Sandbox == nil {
		return nil
	}
	switch wf.Sandbox.Landlock {
	case "", BestEffort, Required, Off:
	default:
		is.Add("invalid_sandbox", "[sandbox] landlock: %q must be best_effort, required or off", wf.Sandbox.Landlock)
	}
	if wf.Sandbox.Landlock == Required && wf.Policy == nil {
		is.Add("invalid_sandbox", "[sandbox] landlock = \"required\" needs a [policy] block: a workflow without one allows everything and is not confined")
	}
	return is
}
