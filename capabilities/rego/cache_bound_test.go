package rego

import (
	"fmt"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// The cache of prepared policies never holds more than maxCached, and
// below that bound a policy is prepared once: preparing it again returns
// the same decider.
func TestPreparedPolicyCacheIsBounded(t *testing.T) {
	cacheMu.Lock()
	clear(cache)
	cacheMu.Unlock()
	t.Cleanup(func() {
		cacheMu.Lock()
		clear(cache)
		cacheMu.Unlock()
	})
	policyN := func(i int) *workflow.RegoPolicy {
		return &workflow.RegoPolicy{Inline: fmt.Sprintf("package agent\nallow if input.args.n == %d\n", i)}
	}
	first, err := prepare(policyN(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepare(policyN(1), nil); err != nil {
		t.Fatal(err)
	}
	if again, err := prepare(policyN(0), nil); err != nil || again != first {
		t.Errorf("a cached policy was prepared again (%v)", err)
	}
	for i := 2; i <= 2*maxCached; i++ {
		if _, err := prepare(policyN(i), nil); err != nil {
			t.Fatal(err)
		}
		cacheMu.Lock()
		n := len(cache)
		cacheMu.Unlock()
		if n > maxCached {
			t.Fatalf("after %d policies the cache holds %d, more than %d", i+1, n, maxCached)
		}
	}
}
