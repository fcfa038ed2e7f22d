package env_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/env"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The env family's fixtures (docs/fixtures.md), with the families they
// use linked.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
