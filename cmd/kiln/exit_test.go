package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/kilnworks/kiln/gen"
	gneeds "github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestFailedMapsEveryErrorKind: the one error-to-exit-code mapping of the
// kiln commands, kind by kind, wrapped or not.
func TestFailedMapsEveryErrorKind(t *testing.T) {
	parse := &gen.ParseError{File: "w.toml", Line: 3, Msg: "bad"}
	cases := []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"parse", parse, cli.ExitUsage, parse.Error() + "\n"},
		{"wrapped parse", fmt.Errorf("load: %w", parse), cli.ExitUsage, "load: " + parse.Error() + "\n"},
		{"invalid", &gen.ValidationError{Workflow: "w"}, cli.ExitFailed, `{"workflow":"w","ok":false,"issues":[]}` + "\n"},
		{"signature", &gen.SignatureError{File: "w.toml", Msg: "does not verify"}, cli.ExitFailed, "kiln x: w.toml: signature: does not verify\n"},
		{"conflict", &gneeds.ConflictError{Msg: "rw and ro"}, cli.ExitFailed, "kiln x: needs conflict: rw and ro\n"},
		{"go build", &gen.BuildError{Err: errors.New("exit status 1")}, cli.ExitFailed, "kiln x: go build: exit status 1\n\n"},
		{"environment", errors.New("no kiln source tree"), cli.ExitUsage, "kiln x: no kiln source tree\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := failed("kiln x", c.err, &stderr); code != c.code || stderr.String() != c.stderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, stderr.String(), c.code, c.stderr)
			}
		})
	}

	var stderr bytes.Buffer
	capErr := &gen.CapabilityError{Code: "unsupported_capability", Workflow: "w", Profile: "p", RequiredCapability: "tools.http"}
	if code := failed("kiln x", capErr, &stderr); code != cli.ExitFailed || !bytes.HasPrefix(stderr.Bytes(), []byte(`{"error":{"code":"unsupported_capability"`)) {
		t.Fatalf("capability refusal: exit %d, stderr %s", code, stderr.String())
	}
}
