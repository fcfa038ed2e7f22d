package oidc

import (
	"maps"
	"slices"
	"testing"

	oidcspec "github.com/kilnworks/kiln/capabilities/oidc/spec"
)

// TestSpecAlgorithmsAreVerified: the algorithms the generator lets a
// binding accept are exactly the ones this family verifies.
func TestSpecAlgorithmsAreVerified(t *testing.T) {
	if got, want := slices.Sorted(slices.Values(oidcspec.Algorithms)), slices.Sorted(maps.Keys(algorithms)); !slices.Equal(got, want) {
		t.Fatalf("spec algorithms %v, verified %v", got, want)
	}
}
