package runtime

import (
	"fmt"
	"testing"
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
