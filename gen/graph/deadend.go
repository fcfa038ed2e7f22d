package graph

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// MinimalDeadEnds is the dead-end analysis used when the caller passes
// none (Options.DeadEnds): a condition without an out-edge for "true" or
// "false", and a switch, whose value can be any string (a switch has no
// default edge). It does not know the values an llm_infer output schema
// allows, so it marks every switch; `kiln graph` and the generator pass
// the lint's analysis (gen.Lint), which does.
func MinimalDeadEnds(w *workflow.Workflow) map[string]string {
	out := map[string]string{}
	for _, n := range w.Nodes {
		if n.Type != "condition" && n.Type != "switch" {
			continue
		}
		labels := map[string]bool{}
		for _, e := range w.Edges {
			if e.From == n.ID {
				labels[e.When] = true
			}
		}
		if n.Type == "condition" {
			var missing []string
			for _, b := range []string{"true", "false"} {
				if !labels[b] {
					missing = append(missing, fmt.Sprintf("%q", b))
				}
			}
			if len(missing) > 0 {
				out[n.ID] = "no out-edge for " + strings.Join(missing, " or ")
			}
			continue
		}
		var handled []string
		for l := range labels {
			handled = append(handled, fmt.Sprintf("%q", l))
		}
		sort.Strings(handled)
		out[n.ID] = "a value other than " + strings.Join(handled, ", ") + " matches no out-edge"
		if len(handled) == 0 {
			out[n.ID] = "no out-edge matches any value"
		}
	}
	return out
}
