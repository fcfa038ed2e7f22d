package shell_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/shell"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The shell-* fixtures (WORKFLOW-FORMAT §8) run here, where the families they
// use are linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	fixturetest.RunPrefixed(t, "../../testdata/fixtures", 6, "shell-")
}
