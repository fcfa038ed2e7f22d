package mcp_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The mcp family's fixtures (docs/fixtures.md), run on the fixture
// runner's mock MCP client, with the families they use linked.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
