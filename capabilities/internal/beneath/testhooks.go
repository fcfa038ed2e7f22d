//go:build kiln_testhooks

package beneath

// checksOff, in test builds only, makes Open a plain openat(2) that
// follows every symlink and "..": kiln's own resolution is then out of
// the way, so a test can prove that Landlock alone holds
// (capabilities/sandbox, docs/sandbox.md).
var checksOff bool

// SwitchChecksOffForTest switches the resolution off for the rest of the
// process. Call it before any goroutine uses this package.
func SwitchChecksOffForTest() { checksOff = true }
