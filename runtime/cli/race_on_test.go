//go:build race

package cli_test

// raceEnabled: the race detector's shadow memory does not fit under a
// small RLIMIT_DATA, so the memory budget test skips itself.
const raceEnabled = true
