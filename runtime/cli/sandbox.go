package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/confine"
)

// sandboxRequest lists what the process touches after confinement beyond
// its [policy]: the state directory, --input, log files, --record's
// directory, --record-dir and, in serve mode, the --bind and ops addresses
// (docs/sandbox.md).
func sandboxRequest(s *settings, o Options, fs *flag.FlagSet, serve bool) confine.Request {
	req := confine.Request{Workflow: o.Workflow, StateDir: s.stateDir}
	if s.input != "" && s.input != "-" {
		req.ReadFiles = append(req.ReadFiles, s.input)
	}
	a := auditOptions(s, o)
	for _, t := range []string{a.Target, a.AuditTarget} {
		if p, ok := strings.CutPrefix(t, "file:"); ok && p != "" && !a.Disabled {
			req.WriteFiles = append(req.WriteFiles, p)
			if a.Rotation != "" && a.Rotation != "never" {
				req.WriteDirs = append(req.WriteDirs, filepath.Dir(p))
			}
		}
	}
	if s.record != "" {
		req.WriteDirs = append(req.WriteDirs, filepath.Dir(s.record))
	}
	if s.rec.dir != "" {
		req.WriteDirs = append(req.WriteDirs, s.rec.dir) // tapes: listed, written, pruned
	}
	if f := fs.Lookup("bind"); f != nil && serve {
		req.Binds = append(req.Binds, f.Value.String())
	}
	if addr := opsBind(fs, o.Workflow); addr != "" && serve {
		req.Binds = append(req.Binds, addr)
	}
	return req
}

// confineProcess applies the confinement and audits what is in force.
// done is true when the process must not start (exit 6).
func confineProcess(req confine.Request, o Options, audit *slog.Logger) (code int, done bool) {
	r, err := confine.Apply(req)
	if err != nil {
		audit.Error("sandbox.refused", "workflow", o.Workflow.Name, "error", err.Error())
		fmt.Fprintf(o.Stderr, "%s: refusing to start: %s\n", o.Prog, runtime.Redact(err.Error()))
		return ExitBlocked, true
	}
	attrs := []any{"workflow", o.Workflow.Name, "mode", r.Mode, "abi", r.ABI,
		"enforced", strings.Join(r.Enforced, ","), "rules", len(r.Rules)}
	switch {
	case o.Workflow.Policy == nil:
		// policy.allow_all already warns: such a process is not confined.
	case r.Confined:
		audit.Info("sandbox.applied", append(attrs, "not_enforced", strings.Join(r.NotEnforced, "; "))...)
	default:
		audit.Warn("sandbox.unconfined", append(attrs, "detail", r.Detail)...)
	}
	return 0, false
}
