package cli

import (
	"bytes"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

// TestOutcomePrinted: the outcome a one-shot run prints is byte for byte
// what runtime.EncodeJSONIndent writes, for every status and value shape
// (finish indents the outcome's own MarshalJSON).
func TestOutcomePrinted(t *testing.T) {
	tree, err := runtime.DecodeJSON([]byte(`{"b":[1,2.50,{"z":null,"a":"<&>"}],"a":"é\u2028","n":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*runtime.Outcome{
		{Status: runtime.StatusCompleted},
		{Status: runtime.StatusCompleted, FinalValue: tree, LastNode: "n"},
		{Status: runtime.StatusCompleted, FinalValue: "text", HTTPResponse: &runtime.HTTPResponse{Status: 201, ContentType: "application/json", Body: `{"x":1}`}},
		{Status: runtime.StatusCompleted, FinalValue: []any{}, LastNode: "last"},
		{Status: runtime.StatusFailed, Reason: "rejected", LastNode: "check"},
		{Status: runtime.StatusTimedOut, ElapsedMS: 1500, LastNode: "slow"},
		{Status: runtime.StatusPaused, RunID: "r-1", Reason: "approve me", LastNode: "gate"},
		{Status: runtime.StatusErrored, Reason: "boom", Err: &runtime.Error{Class: runtime.ClassConfig}},
		{Status: runtime.StatusErrored, Reason: "no class"},
	} {
		want, err := runtime.EncodeJSONIndent(o)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := finish(&runtime.Report{Outcome: o}, &settings{}, Options{Prog: "agent", Stdout: &out, Stderr: &errb},
			func(code int, format string, args ...any) int { t.Fatalf(format, args...); return code })
		if got := out.String(); got != string(want)+"\n" || code != ExitCode(o.Status) {
			t.Errorf("%s: exit %d, printed\n%s\nwant\n%s", o.Status, code, got, want)
		}
	}
}
