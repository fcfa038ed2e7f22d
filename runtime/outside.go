package runtime

import (
	"bytes"
	"context"
	"encoding/json"
)

// Outside is the one seam through which handlers reach the outside world
// (intelligence, MCP, HTTP, shell, files, environment, internal events).
// A run without one performs every interaction directly; a recorder
// (runtime/tape) performs them and writes each request and answer to a
// tape; a replayer answers them from a tape and performs none.
type Outside interface {
	// Interact answers one request of kind (for example "llm.complete",
	// "http.request") made by the node of c. perform does the real
	// interaction: a recorder calls it, a replayer never does and returns
	// the recorded answer as json.RawMessage instead.
	Interact(ctx context.Context, c *Call, kind string, req any, perform func() (any, error)) (any, error)
}

type outsideKey struct{}

// WithOutside returns ctx carrying o: a run started with it (and its child
// runs) send their outside interactions through o. The seam travels in the
// context, not in the Run, so runs that neither record nor replay carry
// nothing for it.
func WithOutside(ctx context.Context, o Outside) context.Context {
	return context.WithValue(ctx, outsideKey{}, o)
}

// OutsideFrom returns the Outside ctx carries; nil when none.
func OutsideFrom(ctx context.Context) Outside {
	o, _ := ctx.Value(outsideKey{}).(Outside)
	return o
}

// Interact sends one outside interaction of node c through the Outside
// ctx carries. Without one (the common case) it is a direct call of
// perform.
// A replayed answer is decoded into T; a replayed failure comes back as
// an *Error of its recorded class.
func Interact[T any](ctx context.Context, c *Call, kind string, req any, perform func() (T, error)) (T, error) {
	o := OutsideFrom(ctx)
	if o == nil {
		return perform()
	}
	v, err := o.Interact(ctx, c, kind, req, func() (any, error) { return perform() })
	var out T
	switch x := v.(type) {
	case json.RawMessage: // first: when T is any, a replayed answer is a T too
		// JSON values (any, objects) decode as the runtime's own values;
		// typed answers through encoding/json.
		dv, derr := DecodeJSON(x)
		if derr != nil {
			return out, c.Errorf(ClassTool, "replay: recorded %s answer is not JSON: %v", kind, derr)
		}
		if t, ok := dv.(T); ok {
			return t, err
		}
		dec := json.NewDecoder(bytes.NewReader(x))
		dec.UseNumber() // numbers inside typed answers stay exact, as recorded
		if derr := dec.Decode(&out); derr != nil {
			return out, c.Errorf(ClassTool, "replay: recorded %s answer does not fit: %v", kind, derr)
		}
	case T:
		return x, err
	}
	return out, err
}
