package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/runtime"
)

// explainDryRun tells, per node of a --dry-run, what it would have done
// and the policy decision it met: side-effecting nodes checked the policy
// and answered a placeholder instead of acting; a denial ends the run at
// its node, with the reason. Nothing was done either way.
func explainDryRun(w io.Writer, rep *runtime.Report) {
	fmt.Fprintf(w, "dry run of %s: what each node would do (nothing outside was touched)\n", rep.Workflow)
	rows := [][]string{{"#", "NODE", "KIND", "WOULD", "POLICY"}}
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
		rows = append(rows, []string{strconv.Itoa(i + 1), e.NodeID, e.Kind, would, decision})
	}
	writeColumns(w, rows)
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

// writeColumns writes rows as left-aligned columns, two spaces apart
// (text/tabwriter would do it, at a size every sealed binary would pay).
func writeColumns(w io.Writer, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("  ")
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

func oneLine(s string) string {
	s = runtime.Redact(strings.Join(strings.Fields(s), " "))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
