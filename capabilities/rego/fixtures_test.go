package rego_test

import (
	"testing"

	"github.com/kilnworks/kiln/gen/fixture/fixturetest"
)

// The rego family's fixtures (docs/fixtures.md): a Rego policy allowing
// and denying what the static allowlist allows. The families they use are
// linked by rego_test.go.
func TestFixtures(t *testing.T) {
	fixturetest.Run(t, "testdata/fixtures")
}
