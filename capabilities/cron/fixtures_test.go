package cron_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/cron"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The cron family's fixtures (docs/fixtures.md), with the families they
// use linked.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
