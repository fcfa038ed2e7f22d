package httpclient_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/secrets"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The http-* and secrets-* fixtures (WORKFLOW-FORMAT §8) run here, where the families they
// use are linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	fixturetest.RunPrefixed(t, "../../testdata/fixtures", 7, "http-", "secrets-")
}
