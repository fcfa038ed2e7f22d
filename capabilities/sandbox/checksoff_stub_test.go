//go:build !kiln_testhooks

package sandbox

import (
	"testing"

	"github.com/kilnworks/kiln/runtime/testtool"
)

// Without the kiln_testhooks tag the checks-off hook is not compiled
// (checksoff_test.go): say so, and fail under CI=true, where make test
// passes the tag.
func missingHook(t *testing.T) {
	testtool.Missing(t, "kiln's checks-off hook is compiled only with the kiln_testhooks tag: go test -tags kiln_testhooks ./capabilities/sandbox (make test passes it)")
}

func TestChecksOffLandlockAloneRefuses(t *testing.T)   { missingHook(t) }
func TestChecksOffSymlinkSwapZeroEscapes(t *testing.T) { missingHook(t) }
