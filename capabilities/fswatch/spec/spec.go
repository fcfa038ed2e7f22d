// Package spec declares the fswatch family's trigger type, fs_watch (see
// docs/reference.md). It holds data and checks only, so the generator
// links it without the family and fsnotify.
package spec

import (
	"slices"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Events are the event names a trigger may filter on.
var Events = []string{"create", "modify", "remove", "rename"}

// Family is the fswatch family's declaration.
var Family = spec.Family{
	ID: "fswatch",
	Triggers: []spec.Trigger{{
		Name: "fs_watch",
		Doc: "Watches a path and starts a run per settled change, one run at a time (a change while the previous run is in flight is skipped and audited). " +
			"A burst of events on one path within debounce_ms becomes one fire, reported as remove or rename when the burst ended that way, else create when the path appeared during it, else modify.",
		Keys: []spec.Key{
			{Name: "path", Type: spec.String, Required: true, Doc: "the file or directory to watch (relative to the workflow file)"},
			{Name: "recursive", Type: spec.Bool, Default: "false", Doc: "watch every subdirectory, including ones created later"},
			{Name: "events", Type: spec.Strings, Default: "all four", Doc: "the events that fire: create, modify, remove, rename"},
			{Name: "debounce_ms", Type: spec.Int, Default: "250", Doc: "how long a path must be quiet before it fires"},
		},
		Limits:  []string{"debounce_ms >= 0"},
		Check:   CheckTrigger,
		Payload: "{type, path, event, fired_at_unix_ms, tick}",
	}},
}

// CheckTrigger checks an fs_watch trigger.
func CheckTrigger(t *workflow.Trigger, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("path", t.Path != "")
	seen := map[string]bool{}
	for _, ev := range t.Events {
		switch {
		case !slices.Contains(Events, ev):
			is.Add("invalid_fs_events", "event %q must be one of create, modify, remove, rename", ev)
		case seen[ev]:
			is.Add("invalid_fs_events", "event %q is listed twice", ev)
		}
		seen[ev] = true
	}
	if t.DebounceMS != nil && *t.DebounceMS < 0 {
		is.Add("out_of_range", "debounce_ms must not be negative, got %d", *t.DebounceMS)
	}
	return is
}
