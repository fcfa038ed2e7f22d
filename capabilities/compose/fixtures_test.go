package compose_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/compose"
	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The compose family's fixtures (docs/fixtures.md), with the families
// they use linked.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
