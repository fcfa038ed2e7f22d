package llm_test

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/fixture"
)

// The llm-* fixtures (WORKFLOW-FORMAT §8) run here, where llm and the
// families they use are linked (see the blank imports of this package's
// tests); gen/fixture's own suite skips them.
func TestLLMFixtures(t *testing.T) {
	all, err := fixture.Discover("../../testdata/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range all {
		if !strings.HasPrefix(f.Name, "llm-") {
			continue
		}
		n++
		t.Run(f.Name, func(t *testing.T) {
			res := fixture.Run(f, fixture.Options{})
			if !res.Pass {
				t.Fatalf("%s\n  status %s at %q, path %v", res.Why(), res.Status, res.LastNode, res.Path)
			}
		})
	}
	if n < 11 {
		t.Fatalf("found %d llm fixtures, want 11", n)
	}
}
