package policy

import (
	"strings"
	"testing"
)

// The MCP target checks hold at the very first byte too: a NUL or a
// percent-encoded dot segment that starts the target is refused like one
// further in.
func TestMCPTargetCheckedFromTheFirstByte(t *testing.T) {
	for target, want := range map[string]string{
		"\x00docs://pages/a": "NUL byte",
		"%2e%2e":             "'..' segment",
		"%2E%2e/secret":      "'..' segment",
		"%2e":                "'.' segment",
	} {
		err := CheckMCPTarget("mcp.resource", target)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a refusal naming %s", target, err, want)
		}
	}
}
