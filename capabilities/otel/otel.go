// Package otel is the OpenTelemetry capability family (build tag
// kiln_otel): a workflow with a [logging.otel] block exports one span per
// run and one child span per node attempt over OTLP (grpc, http/protobuf
// or http/json), using the official OpenTelemetry Go SDK. Only binaries
// whose workflow declares [logging.otel] link it.
//
// The process extension's Setup installs an Observer on the engine; Close
// flushes the spans still queued and shuts the exporter down, bounded by
// ShutdownTimeout, so a one-shot run's spans leave before the process
// exits. Export failures never fail or slow a run: spans are queued and
// sent in the background, and each kind of failure is reported once on the
// audit log, redacted.
package otel

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// ShutdownTimeout bounds Close: how long the process may wait at exit for
// queued spans to reach the collector.
const ShutdownTimeout = 5 * time.Second

// shutdownTimeout is ShutdownTimeout; tests shorten it.
var shutdownTimeout = ShutdownTimeout

// active is the pipeline Setup started; Close shuts it down.
var active struct {
	sync.Mutex
	p *Pipeline
}

func init() {
	runtime.RegisterExtension(runtime.Extension{Name: "otel", Setup: setup, Close: closeActive})
}

// setup starts the export pipeline of the program's [logging.otel] block
// and installs its Observer; a program without one is left alone.
func setup(ctx context.Context, h *runtime.Host) error {
	lg, ignored := findConfig(h.Program)
	if lg == nil {
		return nil
	}
	audit := h.Engine.Audit
	if audit == nil {
		audit = slog.New(slog.DiscardHandler)
	}
	if len(ignored) > 0 {
		audit.Warn("otel.config_ignored", "ignored", ignored,
			"detail", "one process exports to one collector: the first [logging.otel] block (root workflow first) is used")
	}
	if h.Engine.Observer != nil {
		audit.Warn("otel.not_started", "detail", "an observer is already installed on the engine")
		return nil
	}
	cfg, err := NewConfig(lg.OTel, h.Program.Workflow.Name)
	if err != nil {
		return err
	}
	// [logging.audit] include_reason = false keeps reasons out of the
	// audit log; they stay out of spans too.
	if root := h.Program.Workflow.Logging; root != nil && root.Audit != nil {
		if ir := root.Audit.IncludeReason; ir != nil && !*ir {
			cfg.OmitReasons = true
		}
	}
	p, err := Start(ctx, cfg, audit)
	if err != nil {
		return err
	}
	active.Lock()
	prev := active.p
	active.p = p
	active.Unlock()
	if prev != nil { // a second Setup in one process (tests): do not leak the first
		shutdown(prev)
	}
	h.Engine.Observer = p.Observer()
	return nil
}

// closeActive flushes and stops the pipeline Setup started, if any.
func closeActive() error {
	active.Lock()
	p := active.p
	active.p = nil
	active.Unlock()
	if p == nil {
		return nil
	}
	return shutdown(p)
}

func shutdown(p *Pipeline) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return p.Shutdown(ctx)
}

// findConfig returns the [logging] block whose otel table the process
// uses: the root workflow's, else the first child's (depth first, children
// by declared path). Further blocks that differ are listed as ignored.
func findConfig(p *runtime.Program) (*workflow.Logging, []string) {
	var found *workflow.Logging
	var ignored []string
	seen := map[*runtime.Program]bool{}
	var walk func(p *runtime.Program, where string)
	walk = func(p *runtime.Program, where string) {
		if p == nil || seen[p] {
			return
		}
		seen[p] = true
		if lg := p.Workflow.Logging; lg != nil && lg.OTel != nil {
			switch {
			case found == nil:
				found = lg
			case !sameOTel(found.OTel, lg.OTel):
				ignored = append(ignored, where)
			}
		}
		for _, path := range runtime.SortedKeys(p.Children) {
			walk(p.Children[path], path)
		}
	}
	walk(p, "")
	return found, ignored
}

func sameOTel(a, b *workflow.OTelLog) bool {
	return a.Endpoint == b.Endpoint && a.ServiceName == b.ServiceName && a.Protocol == b.Protocol &&
		maps.Equal(a.ResourceAttrs, b.ResourceAttrs) && sampleRatio(a) == sampleRatio(b)
}
