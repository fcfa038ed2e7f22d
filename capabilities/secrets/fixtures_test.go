package secrets_test

import (
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/secrets"
	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The secrets family's fixtures (docs/fixtures.md), with the families they
// use linked: a secret reaches the world through an http_request header.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
