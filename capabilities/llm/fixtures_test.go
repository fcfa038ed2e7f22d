package llm_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/llm"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The llm family's fixtures (docs/fixtures.md), run on the fixture
// runner's mock intelligence client, with the families they use linked;
// policy-* are prompt injections that must not move a write outside the
// policy.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
