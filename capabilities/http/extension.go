package http

import (
	"flag"
	"os"
	"time"

	"github.com/kilnworks/kiln/runtime"
)

// flagBind is --bind (env KILN_BIND).
var flagBind string

func init() {
	// A run's audit lines take the formatting shortcut (runtime/auditline.go).
	runtime.EnableServingAudit()
	runtime.RegisterExtension(runtime.Extension{
		Name: "http",
		Flags: func(fs *flag.FlagSet) {
			def := os.Getenv("KILN_BIND")
			if def == "" {
				def = "127.0.0.1:8080"
			}
			fs.StringVar(&flagBind, "bind", def, "serve mode: address of the HTTP listener (env KILN_BIND)")
		},
		Listeners: func(h *runtime.Host) ([]runtime.Listener, error) {
			if len(h.Program.Workflow.HTTPRoutes) == 0 {
				return nil, nil
			}
			// The CLI's --drain-timeout-secs; 0 there means no grace.
			drain := h.DrainTimeout
			if drain <= 0 {
				drain = time.Nanosecond
			}
			// --timeout-secs (h.RunTimeout) bounds every request's run.
			s, err := New(h, Config{Addr: flagBind, DrainTimeout: drain, RunTimeout: h.RunTimeout})
			if err != nil {
				return nil, err
			}
			return []runtime.Listener{s}, nil
		},
	})
}
