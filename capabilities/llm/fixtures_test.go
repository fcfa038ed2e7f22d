package llm_test

import (
	"testing"

	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The llm-* fixtures (WORKFLOW-FORMAT §8) run here, where llm and the
// families they use are linked (see the blank imports of this package's
// tests); gen/fixture's own suite skips them.
func TestLLMFixtures(t *testing.T) {
	fixturetest.RunPrefixed(t, "../../testdata/fixtures", 11, "llm-")
}
