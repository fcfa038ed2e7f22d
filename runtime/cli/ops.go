package cli

import (
	"flag"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// opsBind is the ops listener's address (--ops-bind, else [server]
// ops_bind; docs/operations.md), or "" when the binary links no ops
// listener (a one-shot binary has no --ops-bind) or none is configured.
// The flag belongs to the ops extension; the sandbox needs its port.
func opsBind(fs *flag.FlagSet, wf *workflow.Workflow) string {
	f := fs.Lookup("ops-bind")
	if f == nil {
		return ""
	}
	if v := f.Value.String(); v != "" {
		return v
	}
	if wf.Server != nil {
		return wf.Server.OpsBind
	}
	return ""
}
