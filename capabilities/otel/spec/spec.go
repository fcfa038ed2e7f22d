// Package spec declares what the otel family states about a workflow: the
// needs of its [logging.otel] block (see docs/reference.md).
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the otel family's declaration.
var Family = spec.Family{
	ID:            "otel",
	Needs:         needs,
	NeedsIfLinked: true,
	NeedsDoc:      "the host of the [logging.otel] endpoint (class family:otel; none when the endpoint comes from the environment)",
}

// needs: the collector is operator configuration kiln reaches itself, not
// an http_request target, so [policy.http] does not cap it.
func needs(wf *workflow.Workflow) []spec.Need {
	if wf.Logging == nil || wf.Logging.OTel == nil {
		return nil
	}
	if h := rules.Hostname(wf.Logging.OTel.Endpoint); h != "" {
		return []spec.Need{{Class: "family:otel", Kind: spec.NeedNetwork, Host: h, Ungoverned: true}}
	}
	return nil
}
