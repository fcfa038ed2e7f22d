package mcp_test

import (
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/data"
	"github.com/kilnworks/kiln/gen/fixture"
)

// The mcp-* fixtures (WORKFLOW-FORMAT §8, mock MCP client) run here, where
// the mcp family is linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	all, err := fixture.Discover("../../testdata/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range all {
		if !strings.HasPrefix(f.Name, "mcp-") {
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
		t.Fatalf("found %d mcp fixtures, want at least 10", n)
	}
}
