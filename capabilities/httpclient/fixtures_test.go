package httpclient_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/secrets"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The httpclient family's fixtures (docs/fixtures.md), with the families
// they use linked (secrets: a secret header with CR or LF is refused).
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
