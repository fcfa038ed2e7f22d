package cli

import (
	"flag"
	"slices"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestSandboxGrantsOpsBind: in serve mode the Landlock request lists the
// ops address (--ops-bind, else [server] ops_bind) so the ops listener
// can bind; a binary without the ops extension (no --ops-bind flag: a
// one-shot binary) and one-shot mode grant nothing for it.
func TestSandboxGrantsOpsBind(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", Server: &workflow.Server{OpsBind: "127.0.0.1:9300"}}
	withFlag := func(v string) *flag.FlagSet {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.String("ops-bind", v, "")
		return fs
	}
	for _, c := range []struct {
		name  string
		fs    *flag.FlagSet
		serve bool
		want  []string
	}{
		{"config", withFlag(""), true, []string{"127.0.0.1:9300"}},
		{"flag wins", withFlag("127.0.0.1:9400"), true, []string{"127.0.0.1:9400"}},
		{"once", withFlag("127.0.0.1:9400"), false, nil},
		{"no ops extension", flag.NewFlagSet("t", flag.ContinueOnError), true, nil},
	} {
		req := sandboxRequest(&settings{}, Options{Workflow: wf}, c.fs, c.serve)
		if !slices.Equal(req.Binds, c.want) {
			t.Errorf("%s: binds %v, want %v", c.name, req.Binds, c.want)
		}
	}
}
