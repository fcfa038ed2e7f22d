package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestKilnTestVerboseLogIsRedacted: `kiln test -v` writes the audit log
// through the same redacting logger as every run, so a registered secret
// that reaches an audit event comes out as [REDACTED].
func TestKilnTestVerboseLogIsRedacted(t *testing.T) {
	const secret = "kilntest-verbose-secret-5150"
	runtime.RedactValue(secret)
	dir := filepath.Join(t.TempDir(), "leaky")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "workflow.toml"), []byte(`
name = "leaky"
[[start_nodes]]
name = "main"
source = "manual"
[[nodes]]
id = "stop"
type = "fail"
reason = "upstream answered `+secret+`"
`), 0o644)
	os.WriteFile(filepath.Join(dir, "fixture.toml"), []byte(`
start = "main"
[expected]
status = "failed"
`), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"test", "-v", dir}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if strings.Contains(errb.String(), secret) || !strings.Contains(errb.String(), "msg=workflow.failed") ||
		!strings.Contains(errb.String(), "upstream answered "+runtime.RedactedMarker) {
		t.Fatalf("verbose audit log:\n%s", errb.String())
	}
}
