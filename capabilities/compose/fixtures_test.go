package compose_test

import (
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/compose"
	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	"github.com/kilnworks/kiln/gen/fixture"
)

// The compose-* fixtures (WORKFLOW-FORMAT §8) run here, where the families they
// use are linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	all, err := fixture.Discover("../../testdata/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range all {
		if !hasPrefix(f.Name, "compose-") {
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
	if n < 10 {
		t.Fatalf("found %d fixtures, want at least 10", n)
	}
}

func hasPrefix(name string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
