package tape

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/runtime"
)

// Text renders the result for a person: one verdict line, then where the
// replay first diverged with the old and new values.
func (r *Result) Text() string {
	var b strings.Builder
	name := r.Tape
	if name == "" {
		name = "tape"
	}
	if r.Same {
		fmt.Fprintf(&b, "%s: same (%s", name, r.NewStatus)
		if r.Replayed != nil {
			fmt.Fprintf(&b, ", %d nodes", len(r.Replayed.Trace.Entries))
		}
		b.WriteString(")\n")
		return b.String()
	}
	fmt.Fprintf(&b, "%s: DIVERGED (recorded %s, replayed %s)\n", name, r.OldStatus, r.NewStatus)
	if d := r.Divergence; d != nil {
		where := fmt.Sprintf("step %d", d.Step+1)
		if d.Step < 0 {
			where = "after the path"
		}
		fmt.Fprintf(&b, "  first divergence: node %s (%s): %s differs\n", orDash(d.Node), where, d.What)
		fmt.Fprintf(&b, "    old: %s\n", show(d.Old))
		fmt.Fprintf(&b, "    new: %s\n", show(d.New))
	}
	for _, u := range r.Unanswered {
		fmt.Fprintf(&b, "  not on the tape (not sent): node %s %s %s\n", u.Node, u.Kind, show(u.Request))
	}
	for _, x := range r.Unused {
		fmt.Fprintf(&b, "  recorded but not asked: node %s %s %s\n", x.Node, x.Kind, show(x.Request))
	}
	if r.DigestChanged {
		b.WriteString("  (the workflow differs from the one recorded)\n")
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// show renders a value on one line, cut to a readable length.
func show(v any) string {
	var data []byte
	switch x := v.(type) {
	case nil:
		return "(none)"
	case json.RawMessage:
		data = compact(x)
	default:
		var err error
		if data, err = runtime.EncodeJSON(x); err != nil {
			return fmt.Sprint(x)
		}
	}
	s := string(runtime.RedactJSON(data))
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}
