package event_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/cron"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/event"
	_ "github.com/kilnworks/kiln/capabilities/interval"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The trigger-* fixtures (WORKFLOW-FORMAT §8) run here, where the families they
// use are linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	fixturetest.RunPrefixed(t, "../../testdata/fixtures", 4, "trigger-")
}
