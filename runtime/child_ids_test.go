package runtime

import (
	"fmt"
	"testing"
)

// A worker's child ids, built idBatch at a time in one string, are each
// exactly the parent's id, a dot and a number never handed out before:
// across reservations, across workers, RunOneChild's and childID's own.
func TestChildIDsAreWholeAndUnique(t *testing.T) {
	r := &Run{ExecutionID: "run-7"}
	var a, b, c childIDs
	seen := map[string]bool{}
	take := func(id string) {
		t.Helper()
		var n uint64
		if _, err := fmt.Sscanf(id, "run-7.%d", &n); err != nil || id != fmt.Sprintf("run-7.%d", n) {
			t.Fatalf("child id %q is not run-7.<number>", id)
		}
		if seen[id] {
			t.Fatalf("child id %q handed out twice", id)
		}
		seen[id] = true
	}
	for i := range 3*idBatch + 5 {
		take(a.next(r, 100-i))
		take(b.next(r, 3))                  // small reservations
		take(c.next(r, max(1, c.reserved))) // RunOneChild's growing ones
		if i%7 == 0 {
			take(r.childID())
		}
	}
}
