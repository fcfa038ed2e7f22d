package event_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/event"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The event family's fixtures (docs/fixtures.md), with the families they
// use linked.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
