package runtime

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// A worker's child numbers, reserved idBatch at a time, give ids that are
// each exactly the parent's id, a dot and a number never handed out
// before: across reservations, across workers, RunOneChild's and
// RunChild's own. A child builds its id when asked, once.
func TestChildIDsAreWholeAndUnique(t *testing.T) {
	r := &Run{ExecutionID: "run-7"}
	var a, b, c childIDs
	seen := map[string]bool{}
	take := func(num uint64) {
		t.Helper()
		child := &Run{parent: r, idNum: num}
		id := child.ID()
		if id != fmt.Sprintf("run-7.%d", num) || num == 0 {
			t.Fatalf("child %d has id %q, want run-7.<number>", num, id)
		}
		if seen[id] {
			t.Fatalf("child id %q handed out twice", id)
		}
		seen[id] = true
		// A grandchild's id is its parent's and its own number.
		if g := (&Run{parent: child, idNum: 3}).ID(); g != id+".3" {
			t.Fatalf("grandchild id %q, want %s.3", g, id)
		}
	}
	for i := range 3*idBatch + 5 {
		take(a.take(r, 100-i))
		take(b.take(r, 3))                  // small reservations
		take(c.take(r, max(1, c.reserved))) // RunOneChild's growing ones
		if i%7 == 0 {
			take(r.children.Add(1)) // RunChild's
		}
	}
}

func init() {
	// t_touch logs an audit event through its run's logger, as a handler
	// that logs does; t_effect audits a side effect the policy allowed.
	// Each is the first thing to ask its child run for its id.
	RegisterNode(NodeKind{Kind: "t_touch", Family: "test", Prepare: func(*workflow.Node, *Program) (NodeFunc, error) {
		return func(_ context.Context, c *Call) (Result, error) {
			c.Run.Audit().Info("t.touched")
			return Next(nil), nil
		}, nil
	}})
	RegisterNode(NodeKind{Kind: "t_effect", Family: "test", Prepare: func(*workflow.Node, *Program) (NodeFunc, error) {
		return func(_ context.Context, c *Call) (Result, error) {
			c.AuditEffect("test.touch", "somewhere")
			return Next(nil), nil
		}, nil
	}})
}

// What a child logs carries the child's own id, which it builds only then:
// each of the 40 children logs once, with an id of its own under the
// run's, through the run's logger (Run.Audit) and through the engine's own
// events (an allowed side effect).
func TestChildAuditCarriesItsID(t *testing.T) {
	for kind, msg := range map[string]string{"t_touch": "t.touched", "t_effect": "effect.allowed"} {
		var buf bytes.Buffer
		e := &Engine{Audit: slog.New(slog.NewTextHandler(&buf, nil))}
		p := parentOf(t, "t_fan", kind)
		if rep := e.Run(context.Background(), p, RunOptions{ExecutionID: "run-9"}); rep.Outcome.Status != StatusCompleted {
			t.Fatalf("%s: %+v", kind, rep.Outcome)
		}
		ids := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			_, rest, ok := strings.Cut(line, " msg="+msg+" execution_id=")
			if !ok {
				continue
			}
			id, _, _ := strings.Cut(rest, " ")
			var n int
			if _, err := fmt.Sscanf(id, "run-9.%d", &n); err != nil || id != fmt.Sprintf("run-9.%d", n) || ids[id] {
				t.Fatalf("%s: child audit line with id %q (not run-9.<number>, or twice):\n%s", kind, id, buf.String())
			}
			ids[id] = true
		}
		if len(ids) != 40 {
			t.Fatalf("%s: %d children logged with their own id, want 40:\n%s", kind, len(ids), buf.String())
		}
	}
}
