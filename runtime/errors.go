package runtime

import (
	"errors"
	"fmt"
)

// Class says what kind of engine error happened; it decides retries,
// HTTP status and the audit event.
type Class string

const (
	ClassPolicy       Class = "policy"       // a policy denial; never retried; HTTP 403
	ClassSchema       Class = "schema"       // output failed its schema / was not JSON; never retried
	ClassTimeout      Class = "timeout"      // the run deadline fired; never retried
	ClassTool         Class = "tool"         // a tool (fs, http, shell, ...) failed; transient
	ClassIntelligence Class = "intelligence" // an intelligence call failed; transient
	ClassMCP          Class = "mcp"          // an MCP call failed; transient
	ClassConfig       Class = "config"       // bad configuration found at run time
	ClassWorkflow     Class = "workflow"     // traversal error (two matching edges, step cap, ...)
	ClassCapability   Class = "capability"   // node kind not compiled in / not provided
	ClassBudget       Class = "budget"       // a [budget] limit was reached; never retried
)

// Error is an engine error. Handlers return it (or any error, which the
// engine wraps as ClassTool) to abort the run with status "errored".
type Error struct {
	Class  Class
	Node   string // node id, filled by the engine when empty
	Kind   string // node kind, filled by the engine when empty
	Msg    string
	Target string // what a policy denial was about (path, url, key, ...)
	Err    error  // optional cause
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Node != "" {
		return fmt.Sprintf("node %s (%s): %s", e.Node, e.Kind, msg)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error of the given class.
func Errorf(class Class, format string, args ...any) *Error {
	return &Error{Class: class, Msg: fmt.Sprintf(format, args...)}
}

// Denied builds a policy denial: "<what> denied on <target>: <reason>".
func Denied(what, target, reason string) *Error {
	return &Error{Class: ClassPolicy, Target: target,
		Msg: fmt.Sprintf("%s denied on %s: %s", what, target, reason)}
}

// AsError returns err as an *Error, wrapping unknown errors as ClassTool.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Class: ClassTool, Err: err}
}

// ClassOf returns the class of err (ClassTool for foreign errors).
func ClassOf(err error) Class { return AsError(err).Class }

// retryable reports whether a node error may be retried under `on`.
// Policy, schema, timeout and structural errors never are.
func retryable(err error, on string) bool {
	switch ClassOf(err) {
	case ClassPolicy, ClassSchema, ClassTimeout, ClassConfig, ClassWorkflow, ClassCapability, ClassBudget:
		return false
	case ClassTool, ClassIntelligence, ClassMCP:
		return true
	}
	return on != "transient"
}
