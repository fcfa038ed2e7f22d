//go:build !kiln_testhooks

package beneath

// checksOff is constant false in every build but a test build with the
// kiln_testhooks tag (testhooks.go), so the compiler drops the branch it
// guards: no binary kiln builds can switch the resolution off.
const checksOff = false
