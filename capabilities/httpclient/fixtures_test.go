package httpclient_test

import (
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/secrets"
	"github.com/kilnworks/kiln/gen/fixture"
)

// The http-* and secrets-* fixtures (WORKFLOW-FORMAT §8) run here, where the families they
// use are linked; gen/fixture's own suite skips them.
func TestFixtures(t *testing.T) {
	all, err := fixture.Discover("../../testdata/fixtures")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range all {
		if !hasPrefix(f.Name, "http-", "secrets-") {
			continue
		}
		n++
		t.Run(f.Name, func(t *testing.T) {
			res := fixture.Run(f, fixture.Options{})
			if !res.Pass {
				t.Fatalf("%s\n  status %s at %q, path %v", res.Why(), res.Status, res.LastNode, res.Path)
			}
		})
	}
	if n < 7 {
		t.Fatalf("found %d fixtures, want at least 7", n)
	}
}

func hasPrefix(name string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
