package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kilnworks/kiln/runtime"
)

// explainDryRun tells, per node of a --dry-run, what it would have done
// and the policy decision it met: side-effecting nodes checked the policy
// and answered a placeholder instead of acting; a denial ends the run at
// its node, with the reason. Nothing was done either way.
func explainDryRun(w io.Writer, rep *runtime.Report) {
	fmt.Fprintf(w, "dry run of %s: what each node would do (nothing outside was touched)\n", rep.Workflow)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tNODE\tKIND\tWOULD\tPOLICY")
	var denied *runtime.Error
	if e := rep.Outcome.Err; e != nil && e.Class == runtime.ClassPolicy {
		denied = e
	}
	for i, e := range rep.Trace.Entries {
		would, decision := explainEntry(e)
		if e.Outcome == "error" {
			would, decision = "stop: "+oneLine(rep.Outcome.Reason), "-"
			if denied != nil && denied.Node == e.NodeID {
				would = "not run"
				decision = "DENIED: " + oneLine(denied.Msg)
			}
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", i+1, e.NodeID, e.Kind, would, decision)
	}
	tw.Flush()
	if denied != nil {
		fmt.Fprintf(w, "the run stops at the denial of node %s; nodes after it are not explained\n", denied.Node)
	}
}

// explainEntry describes one node that ran in a dry run.
func explainEntry(e runtime.TraceEntry) (would, decision string) {
	kind, _ := runtime.LookupNode(e.Kind)
	out, _ := e.Output.(map[string]any)
	if out != nil && out["dry_run"] == true {
		var parts []string
		for _, k := range runtime.SortedKeys(out) {
			if k == "dry_run" {
				continue
			}
			v, err := runtime.EncodeJSON(out[k])
			if err != nil {
				continue
			}
			parts = append(parts, k+"="+string(v))
		}
		return oneLine(e.Kind + " " + strings.Join(parts, " ")), "allowed"
	}
	if kind.SideEffect {
		return "ran (" + e.Outcome + ")", "allowed"
	}
	switch e.Outcome {
	case "terminate", "fail", "pause":
		return e.Outcome, "-"
	}
	would = "run (no side effect)"
	if b, ok := e.Branch.(string); ok {
		would += ", branch " + b
	}
	return would, "-"
}

func oneLine(s string) string {
	s = runtime.Redact(strings.Join(strings.Fields(s), " "))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
