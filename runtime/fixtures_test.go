package runtime_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The engine's own fixtures (docs/fixtures.md): edges and branching
// (branch-*), deadlines, retries, the step cap and the trigger kind
// (engine-*). They use control, data and fs nodes, linked here only: the
// runtime package itself never imports a family.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
