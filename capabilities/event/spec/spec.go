// Package spec declares the event family: the emit_event node kind and the
// internal.event trigger type (see docs/reference.md). It holds data and
// checks only, so the generator links it without the family.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TriggerType is the [[triggers]] type the family serves.
const TriggerType = "internal.event"

// Family is the event family's declaration.
var Family = spec.Family{
	ID: "event",
	Kinds: []spec.Kind{{
		Name: "emit_event",
		Doc: "Fires the internal.event triggers of the same name and returns once the triggered runs have started. Events only reach triggers that are serving; " +
			"otherwise delivered is false and the drop is audited. The triggered run's trigger.principal is the emitting run's, never one from the payload.",
		Keys: []spec.Key{
			{Name: "event", Type: spec.String, Required: true, Doc: "the name of an internal.event trigger"},
			{Name: "payload_from", Type: spec.Path, Doc: "the event payload (an object's fields are copied, any other value is `input`)"},
		},
		Limits: []string{"an event chain is at most 8 hops"},
		Check:  CheckEmitEvent,
		Output: "{event, delivered[, reason]}; dry-run: {event, dry_run: true}",
	}},
	Triggers: []spec.Trigger{{
		Name:    TriggerType,
		Doc:     "Starts a run when an emit_event node of a serving process names it, one run at a time (an event while the previous run is in flight is skipped and audited).",
		Keys:    []spec.Key{{Name: "name", Type: spec.String, Required: true, Doc: "the event name emit_event uses"}},
		Check:   CheckTrigger,
		Payload: "the payload's fields, plus {type, event, hops[, principal]}",
	}},
}

// CheckEmitEvent checks an emit_event node.
func CheckEmitEvent(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("event", n.Event != "")
	return is
}

// CheckTrigger checks an internal.event trigger.
func CheckTrigger(t *workflow.Trigger, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("name", t.Name != "")
	return is
}
