package nesting

import (
	"fmt"
	"testing"
)

// TestMessages: the messages, constants so that no package variable is
// set at start-up, name the limits as they are.
func TestMessages(t *testing.T) {
	if want := fmt.Sprintf("nesting deeper than %d", MaxDepth); deeperMsg != want {
		t.Errorf("deeperMsg = %q, want %q", deeperMsg, want)
	}
	if want := fmt.Sprintf("keys too many or too deep: their paths add up to more than %d MiB", MaxKeyPaths>>20); keyPathsMsg != want {
		t.Errorf("keyPathsMsg = %q, want %q", keyPathsMsg, want)
	}
	if got := (&Error{Line: 7, Msg: deeperMsg}).Error(); got != "line 7: nesting deeper than 64" {
		t.Errorf("Error() = %q", got)
	}
}
