package mcp_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/data"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The mcp-* fixtures (WORKFLOW-FORMAT §8, mock MCP client) run here, where
// the mcp family is linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	fixturetest.RunPrefixed(t, "../../testdata/fixtures", 10, "mcp-")
}
