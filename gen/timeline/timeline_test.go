package timeline_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/timeline"
	"github.com/kilnworks/kiln/runtime"
)

// A value that holds a registered secret and markup is redacted, and its
// markup cannot end the data's script element (redaction re-encodes the
// string it changes).
func TestPageDataRedactedAndScriptSafe(t *testing.T) {
	const secret = "timeline-secret-value-9f2c"
	runtime.RedactSecret("TIMELINE_TEST", secret)
	tp := sample()
	tp.Attempts[5].Output = map[string]any{"rendered": secret + "</script><script>alert(1)</script>"}
	var b bytes.Buffer
	if err := timeline.HTML(&b, []timeline.Run{{Label: "run", Tape: tp}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, secret) {
		t.Fatal("the page holds the secret")
	}
	if n := strings.Count(page, "</script>"); n != 2 { // the data's and the code's own
		t.Fatalf("%d </script> in the page: the data broke out of its element", n)
	}
}
