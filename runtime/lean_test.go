// Tests of the hand-written checks that keep package regexp and math/big
// out of every sealed binary (see the size target in gen/build_test.go).
package runtime

import (
	"encoding/json"
	"testing"
)

// TestNumberEqualExact: JSON numbers compare by value, exactly: no
// float64 rounding of long integers, any spelling of the same value equal.
func TestNumberEqualExact(t *testing.T) {
	equal := [][2]string{
		{"1", "1.0"}, {"1", "1e0"}, {"1", "10e-1"}, {"1.5", "15E-1"}, {"500", "5e+2"},
		{"0", "-0"}, {"0", "0.000e9"}, {"-2.50", "-25e-1"}, {"1e400", "10e399"},
		{"123456789012345678901234567890", "1.23456789012345678901234567890e29"},
	}
	for _, c := range equal {
		if !numberEqual(json.Number(c[0]), json.Number(c[1])) {
			t.Errorf("%s != %s, want equal", c[0], c[1])
		}
	}
	different := [][2]string{
		{"1", "-1"}, {"1", "1.0000001"}, {"0.1", "1"}, {"1e-1", "1e1"},
		// These two differ only beyond float64 precision.
		{"9007199254740993", "9007199254740992"},
		{"123456789012345678901234567890", "123456789012345678901234567891"},
		{"abc", "abd"}, {"1x", "1x0"}, {"1e", "1"}, {"--1", "1"},
	}
	for _, c := range different {
		if numberEqual(json.Number(c[0]), json.Number(c[1])) {
			t.Errorf("%s == %s, want different", c[0], c[1])
		}
	}
}

// TestCheckpointPathRunIDs: run ids are 1..128 of [A-Za-z0-9_.-], never
// "." or "..", so a run id cannot leave the state directory.
func TestCheckpointPathRunIDs(t *testing.T) {
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	for _, ok := range []string{"a", "run-1", "A.b_c-9", string(long[:128])} {
		if _, err := CheckpointPath("/state", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "a b", "é", string(long)} {
		if _, err := CheckpointPath("/state", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
