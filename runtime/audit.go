package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// The audit log is a log/slog logger. Events the engine emits:
// workflow.started, workflow.<status> (completed, failed, timed_out,
// paused, errored), node.completed and node.failed (debug), node.retry
// and policy.denied; capability packages add their own
// (http.auth_denied, cron.fire, ...). docs/operations.md lists them.

// addTriggerAttrs adds to workflow.started who and what started the run:
// the trigger kind (http, event, manual, ...) and, when the trigger
// carries one, the principal's kind and name (set by the http family's
// auth, or inherited from an emitting run; never read from a payload).
func (r *Run) addTriggerAttrs(rec *slog.Record) {
	kind, _ := r.trigger["kind"].(string)
	if kind == "" {
		kind = "manual"
	}
	rec.AddAttrs(slog.String("trigger", kind))
	if p, ok := r.trigger["principal"].(map[string]any); ok {
		pk, _ := p["kind"].(string)
		pn, _ := p["name"].(string)
		rec.AddAttrs(slog.String("principal_kind", pk), slog.String("principal_name", pn))
	}
}

// nodeEventsOn reports whether this run logs node.completed/node.failed:
// [logging] node_events (default true) and a logger that keeps debug
// events. Checked once per node, so a process at info level pays one
// Enabled call and no clock reading per attempt.
func (r *Run) nodeEventsOn() bool {
	if lg := r.Program.Workflow.Logging; lg != nil && lg.NodeEvents != nil && !*lg.NodeEvents {
		return false
	}
	return r.Engine.audit().Handler().Enabled(context.Background(), slog.LevelDebug)
}

// AuditEffect logs effect.allowed at info level: c's node is about to
// touch target through effect (fs.write, http.request, mcp.call_tool,
// shell.run, ...), which the policy allowed, so the audit answers what a
// run touched as well as who started it. Handlers call it right before
// the real interaction (never in dry-run or replay, which touch nothing).
// target must not carry secrets: a URL's host, not its query.
func (c *Call) AuditEffect(effect, target string) {
	c.Run.auditf(slog.LevelInfo, "effect.allowed", "node", c.Node.ID, "kind", c.Node.Type, "effect", effect, "target", target)
}

// auditNode emits node.completed or node.failed for one attempt of n.
func (r *Run) auditNode(n *workflow.Node, attempt int, d time.Duration, res Result, err error) {
	ms := float64(d.Microseconds()) / 1000
	if err != nil {
		e := AsError(err)
		r.auditf(slog.LevelDebug, "node.failed", "node", n.ID, "kind", n.Type, "attempt", attempt,
			"elapsed_ms", ms, "class", string(e.Class), "error", e.Error())
		return
	}
	r.auditf(slog.LevelDebug, "node.completed", "node", n.ID, "kind", n.Type, "attempt", attempt,
		"elapsed_ms", ms, "branch", res.Branch)
}

// AuditOptions configures NewAuditLogger. Empty fields take defaults.
type AuditOptions struct {
	Level  string // trace | debug | info | warn | error | off (default info)
	Format string // text | json (default text)
	Target string // stderr | stdout | file:PATH (default stderr)
	// Disabled discards every event ([logging] enabled = false, --quiet).
	Disabled bool
	// RedactFields names attributes whose values are always logged as
	// [REDACTED] ([logging.audit] redact_fields); DropFields names
	// attributes left out entirely (reason, for include_reason = false).
	RedactFields, DropFields []string
	// Rotation applies to file targets: never (default), minutely, hourly
	// or daily (see rotationPeriod).
	Rotation string
	// AuditTarget is a dedicated audit sink ([logging.audit] target): every
	// event is written to it as well as to Target, once when both name the
	// same stream or file.
	AuditTarget string
	// Stdout and Stderr stand in for the process streams (tests, embedding).
	Stdout, Stderr io.Writer
	// Now is the clock rotation reads (default time.Now).
	Now func() time.Time
}

// NewAuditLogger builds the audit logger. Every record passes through the
// redaction of RedactValue before it is formatted. The returned closer
// releases the file targets (a no-op for the standard streams).
func NewAuditLogger(o AuditOptions) (*slog.Logger, io.Closer, error) {
	level, off, err := ParseLogLevel(o.Level)
	if err != nil {
		return nil, nil, err
	}
	if o.Disabled || off {
		return slog.New(slog.DiscardHandler), nopCloser{}, nil
	}
	period, layout, err := rotationPeriod(o.Rotation)
	if err != nil {
		return nil, nil, err
	}
	dest, err := logDest(o.Target)
	if err != nil {
		return nil, nil, err
	}
	w, closer, err := openSink(dest, o.Target, &o, period, layout)
	if err != nil {
		return nil, nil, err
	}
	if o.AuditTarget != "" {
		adest, err := logDest(o.AuditTarget)
		if err != nil {
			closer.Close()
			return nil, nil, err
		}
		if adest != dest {
			aw, acloser, err := openSink(adest, o.AuditTarget, &o, period, layout)
			if err != nil {
				closer.Close()
				return nil, nil, err
			}
			w, closer = teeWriter{w, aw}, closers{closer, acloser}
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	var format func(io.Writer) slog.Handler
	plainText := false
	switch o.Format {
	case "", "text":
		format = func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, opts) }
		plainText = true
	case "json":
		format = func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, opts) }
	default:
		closer.Close()
		return nil, nil, fmt.Errorf("log format %q: want text or json", o.Format)
	}
	sink := newLineSink(w, level, format)
	sink.plainText = plainText
	closer = closers{sink, closer} // held lines are written before the files close
	rh := &redactHandler{inner: sink}
	if len(o.RedactFields)+len(o.DropFields) > 0 {
		rh.fields = map[string]fieldRule{}
		for _, k := range o.RedactFields {
			rh.fields[k] = fieldRedact
		}
		for _, k := range o.DropFields {
			rh.fields[k] = fieldDrop
		}
	}
	return slog.New(rh), closer, nil
}

type fieldRule int

const (
	fieldRedact fieldRule = iota + 1
	fieldDrop
)

// ParseLogLevel reads a level name. An EnvFilter-style directive
// ("info,kiln=debug") is read by its first plain level.
func ParseLogLevel(s string) (level slog.Level, off bool, err error) {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" || strings.Contains(part, "=") {
			continue
		}
		switch strings.ToLower(part) {
		case "trace", "debug":
			return slog.LevelDebug, false, nil
		case "info":
			return slog.LevelInfo, false, nil
		case "warn", "warning":
			return slog.LevelWarn, false, nil
		case "error":
			return slog.LevelError, false, nil
		case "off", "none":
			return 0, true, nil
		}
		return 0, false, fmt.Errorf("log level %q: want trace, debug, info, warn, error or off", part)
	}
	return slog.LevelInfo, false, nil
}

// logDest names the destination of a log target: stderr, stdout or
// file:ABSPATH, so that two targets naming the same one compare equal.
func logDest(target string) (string, error) {
	switch {
	case target == "" || target == "stderr":
		return "stderr", nil
	case target == "stdout":
		return "stdout", nil
	case strings.HasPrefix(target, "file:"):
		path := strings.TrimPrefix(target, "file:")
		if path == "" {
			return "", fmt.Errorf("log target %q: empty file path", target)
		}
		// Absolute, so that a rotated file opened later does not depend on
		// the working directory.
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", fmt.Errorf("log target %q: %w", target, err)
		}
		return "file:" + abs, nil
	}
	return "", fmt.Errorf("log target %q: want stderr, stdout or file:PATH", target)
}

// openSink opens the destination dest (from logDest) of target.
func openSink(dest, target string, o *AuditOptions, period time.Duration, layout string) (io.Writer, io.Closer, error) {
	switch dest {
	case "stderr":
		if o.Stderr != nil {
			return o.Stderr, nopCloser{}, nil
		}
		return os.Stderr, nopCloser{}, nil
	case "stdout":
		if o.Stdout != nil {
			return o.Stdout, nopCloser{}, nil
		}
		return os.Stdout, nopCloser{}, nil
	}
	path := strings.TrimPrefix(dest, "file:")
	if period > 0 {
		r, err := openRotatingFile(path, period, layout, o.Now)
		if err != nil {
			return nil, nil, fmt.Errorf("log target %q: %w", target, err)
		}
		return r, r, nil
	}
	f, err := openLogFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("log target %q: %w", target, err)
	}
	return f, f, nil // lineSink serialises the writes
}

// teeWriter writes each line to every sink: one that fails does not keep
// the line from the others.
type teeWriter []io.Writer

func (t teeWriter) Write(p []byte) (int, error) {
	var first error
	for _, w := range t {
		if _, err := w.Write(p); err != nil && first == nil {
			first = err
		}
	}
	return len(p), first
}

type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// redactHandler redacts the message and every attribute of each record,
// including attributes added with With before the secret was registered:
// it keeps With/WithGroup state itself and applies it per record, so a
// secret registered late is still caught.
type redactHandler struct {
	inner  slog.Handler
	goas   []groupOrAttrs
	fields map[string]fieldRule // by attribute key, at any depth
}

type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(groupOrAttrs{attrs: attrs})
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(groupOrAttrs{group: name})
}

func (h *redactHandler) with(g groupOrAttrs) *redactHandler {
	goas := make([]groupOrAttrs, len(h.goas), len(h.goas)+1)
	copy(goas, h.goas)
	return &redactHandler{inner: h.inner, goas: append(goas, g), fields: h.fields}
}

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.passes(&r) {
		return h.inner.Handle(ctx, r) // nothing to redact: no copy of the record
	}
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		if a, keep := h.field(a); keep {
			attrs = append(attrs, redactAttr(a))
		}
		return true
	})
	// Rebuild the With/WithGroup nesting from the innermost group out.
	for i := len(h.goas) - 1; i >= 0; i-- {
		g := h.goas[i]
		if g.group != "" {
			attrs = []slog.Attr{{Key: g.group, Value: slog.GroupValue(attrs...)}}
			continue
		}
		pre := make([]slog.Attr, 0, len(g.attrs)+len(attrs))
		for _, a := range g.attrs {
			if a, keep := h.field(a); keep {
				pre = append(pre, redactAttr(a))
			}
		}
		attrs = append(pre, attrs...)
	}
	out := slog.NewRecord(r.Time, r.Level, Redact(r.Message), r.PC)
	out.AddAttrs(attrs...)
	return h.inner.Handle(ctx, out)
}

// passes reports whether h would hand r on as it is: no With state or
// field rules to apply, and nothing to redact.
func (h *redactHandler) passes(r *slog.Record) bool {
	return h.fields == nil && len(h.goas) == 0 && unchanged(r)
}

// recipient is the handler the engine gives rec to: h, or the inner
// handler of a redacting h that would hand rec on unchanged. The per-run
// events then copy their (large) record once less, on the deepest stack a
// request reaches.
func recipient(h slog.Handler, rec *slog.Record) slog.Handler {
	if rh, ok := h.(*redactHandler); ok && rh.passes(rec) {
		return rh.inner
	}
	return h
}

// unchanged reports whether redaction would leave r as it is: no
// registered secret (then redaction is the identity), or none in its
// message or string attributes and no attribute of a kind redaction
// rewrites (errors, other structured values, groups, LogValuers). The
// per-run audit events take this path.
func unchanged(r *slog.Record) bool {
	rs := redactor.Load()
	if rs == nil {
		return true
	}
	if rs.contains(r.Message) {
		return false
	}
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindString:
			ok = !rs.contains(a.Value.String())
		case slog.KindAny, slog.KindGroup, slog.KindLogValuer:
			ok = false
		}
		return ok
	})
	return ok
}

// field applies the configured per-key rules to a and the attributes of
// a group; keep is false when a is to be left out.
func (h *redactHandler) field(a slog.Attr) (out slog.Attr, keep bool) {
	if h.fields == nil {
		return a, true
	}
	switch h.fields[a.Key] {
	case fieldDrop:
		return a, false
	case fieldRedact:
		return slog.String(a.Key, RedactedMarker), true
	}
	if v := a.Value.Resolve(); v.Kind() == slog.KindGroup {
		var group []slog.Attr
		for _, g := range v.Group() {
			if g, keep := h.field(g); keep {
				group = append(group, g)
			}
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(group...)}, true
	}
	return a, true
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		out := make([]slog.Attr, len(group))
		for i, g := range group {
			out[i] = redactAttr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		x := v.Any()
		if err, ok := x.(error); ok {
			return slog.String(a.Key, Redact(err.Error()))
		}
		// Structured values are checked in their encoded form and replaced
		// by the redacted text only when they held a secret.
		var text string
		if b, err := json.Marshal(x); err == nil {
			text = string(b)
		} else {
			text = fmt.Sprint(x)
		}
		if red := Redact(text); red != text {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
