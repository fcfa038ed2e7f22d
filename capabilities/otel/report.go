package otel

import (
	"log/slog"
	"sync"

	"github.com/kilnworks/kiln/runtime"
)

const (
	// maxKinds bounds the distinct export failures reported per process.
	maxKinds = 16
	// maxErrorLen bounds one reported error message.
	maxErrorLen = 512
)

// reporter is the OpenTelemetry global error handler: the SDK hands it
// every failed export (from its background batcher, so runs never wait on
// it). Each kind of failure is reported once on the audit log, redacted:
// a collector that is down for an hour is one line, not thousands.
type reporter struct {
	audit *slog.Logger

	mu     sync.Mutex
	seen   map[string]bool
	capped bool
}

func newReporter(audit *slog.Logger) *reporter {
	return &reporter{audit: audit, seen: map[string]bool{}}
}

// Handle implements otel.ErrorHandler.
func (r *reporter) Handle(err error) {
	if err == nil {
		return
	}
	msg := runtime.Redact(err.Error())
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen] + "..."
	}
	kind := failureKind(msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[kind] {
		return
	}
	if len(r.seen) >= maxKinds {
		if !r.capped {
			r.capped = true
			r.audit.Warn("otel.export_failed", "error", "more kinds of export failure; no longer reported",
				"detail", "spans may be lost; runs are not affected")
		}
		return
	}
	r.seen[kind] = true
	r.audit.Warn("otel.export_failed", "error", msg,
		"detail", "spans may be lost; runs are not affected; further failures of this kind are not reported")
}

// failureKind is the message with every run of digits folded to one '#',
// so failures that differ only in counts, ports or durations are one kind.
func failureKind(msg string) string {
	b := make([]byte, 0, len(msg))
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if '0' <= c && c <= '9' {
			if len(b) == 0 || b[len(b)-1] != '#' {
				b = append(b, '#')
			}
			continue
		}
		b = append(b, c)
	}
	return string(b)
}
