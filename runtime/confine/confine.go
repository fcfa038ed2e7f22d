// Package confine is the start-up step where a binary hands its authority
// to the kernel: after it read what it needs outside its policy (its own
// configuration, TLS and secret files, approvals) and before its first
// node runs, the run CLI calls Apply. The sandbox family
// (capabilities/sandbox) registers the Landlock implementation; this
// package holds only the hook and the report, so the runtime core links
// no Landlock code (docs/sandbox.md).
package confine

import (
	"errors"
	"flag"
	"fmt"
	"sync"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Request is what the process will touch after confinement, beyond what
// its workflows' [policy] blocks allow.
type Request struct {
	Workflow *workflow.Workflow
	StateDir string // --state-dir ("" none): read-write
	// ReadFiles are files the CLI reads after confinement (--input).
	ReadFiles []string
	// WriteFiles are files the CLI appends to (log targets); one that
	// does not exist yet is granted through its directory.
	WriteFiles []string
	// WriteDirs are directories the CLI creates or replaces files in (a
	// rotated log's, --record's: it is written atomically).
	WriteDirs []string
	// Binds are the host:port addresses serve mode listens on.
	Binds []string
}

// Report says what was (or, from Plan, would be) applied.
type Report struct {
	Mode     string `json:"mode"`     // best_effort | required | off
	Confined bool   `json:"confined"` // a Landlock domain is in force
	// ABI is the kernel's Landlock ABI version (0: none).
	ABI int `json:"abi"`
	// Enforced lists what the kernel enforces: fs, net.connect,
	// net.bind, scope.abstract_unix_socket, scope.signal.
	Enforced []string `json:"enforced,omitempty"`
	// NotEnforced lists, one phrase each, what the policy allows that
	// the ruleset could not express or this kernel cannot enforce.
	NotEnforced []string `json:"not_enforced,omitempty"`
	// Rules are the rules in force, one line each ("ro /etc/hosts").
	Rules []string `json:"rules,omitempty"`
	// Detail says why the process is not confined, when it is not.
	Detail string `json:"detail,omitempty"`
	// Refused is set when [sandbox] landlock = "required" cannot be met
	// on this machine: the preflight blocks the start (exit 6).
	Refused string `json:"refused,omitempty"`
}

// Sandbox is an implementation of the confinement.
type Sandbox struct {
	// Plan returns what Apply would do on this machine, applying nothing
	// (the preflight report).
	Plan func(Request) *Report
	// Apply confines the whole process and every child it starts. The
	// report is never nil; the error is set when the workflow requires
	// what this machine cannot give, or when applying failed.
	Apply func(Request) (*Report, error)
}

var (
	mu         sync.Mutex
	registered *Sandbox
	current    *Report
)

// Register installs the implementation (from the sandbox family's init).
func Register(s Sandbox) {
	mu.Lock()
	defer mu.Unlock()
	registered = &s
}

// ErrRequired marks an Apply or Plan failure because [sandbox] landlock =
// "required" cannot be met: the CLI exits 6 (blocked).
var ErrRequired = errors.New(`[sandbox] landlock = "required"`)

// AllowInTest lets a test binary confine itself; it is set only by tests
// that run the confinement in a child process. A test binary otherwise
// never confines itself: tests that run `kiln run` in-process would lose
// their own files.
var AllowInTest bool

// inTest reports whether this is a `go test` binary (the testing package
// registers its flags on the default flag set).
func inTest() bool { return flag.Lookup("test.v") != nil && !AllowInTest }

func unconfined(mode, detail string) *Report {
	return &Report{Mode: mode, Detail: detail}
}

// Plan returns what Apply would apply, without applying it.
func Plan(req Request) *Report {
	mu.Lock()
	s := registered
	mu.Unlock()
	if r := skip(req, s); r != nil {
		return r
	}
	return s.Plan(req)
}

// Apply confines the process (once; later calls return the first
// report). It returns an error wrapping ErrRequired when the workflow
// requires confinement this machine cannot give.
func Apply(req Request) (*Report, error) {
	mu.Lock()
	defer mu.Unlock()
	if current != nil {
		return current, nil
	}
	if r := skip(req, registered); r != nil {
		if r.Refused != "" {
			return r, fmt.Errorf("%w: %s", ErrRequired, r.Refused)
		}
		current = r
		return r, nil
	}
	r, err := registered.Apply(req)
	if err == nil {
		current = r
	}
	return r, err
}

// Current returns the report of the confinement in force (nil before
// Apply ran).
func Current() *Report {
	mu.Lock()
	defer mu.Unlock()
	return current
}

const required = "required"

// Wanted reports whether a workflow tree is confined at start-up, and
// why not. Every workflow whose root has a [policy] is confined unless
// its [sandbox] says landlock = "off"; one without a policy allows
// everything (development) and is not (child workflows run under the
// root's policy). The generator links the sandbox family by the same
// answer (docs/sandbox.md).
func Wanted(wf *workflow.Workflow) (bool, string) {
	// Child workflows run under their parent's policy: the root's decides.
	if wf.Policy == nil {
		return false, "not confined: a workflow without [policy] allows everything (development only)"
	}
	if sb := wf.Sandbox; sb != nil {
		if sb.Landlock == "off" {
			return false, `not confined: [sandbox] landlock = "off"`
		}
		return true, ""
	}
	return true, ""
}

// MayRefuse reports whether Plan or Apply can refuse req: only a workflow
// that requires confinement ([sandbox] landlock = "required") is refused,
// so the preflight plans the others only when it prints its report.
func MayRefuse(req Request) bool {
	sb := req.Workflow.Sandbox
	return sb != nil && sb.Landlock == required
}

// skip returns the report of a process that is not confined, or nil when
// the implementation decides.
func skip(req Request, s *Sandbox) *Report {
	mode := "best_effort"
	if sb := req.Workflow.Sandbox; sb != nil && sb.Landlock != "" {
		mode = sb.Landlock
	}
	if ok, why := Wanted(req.Workflow); !ok {
		return unconfined(mode, why)
	}
	switch {
	case s == nil:
		r := unconfined(mode, "not confined: this binary does not link the sandbox family")
		if mode == required {
			r.Refused = r.Detail
		}
		return r
	case inTest():
		return unconfined(mode, "not confined: a test binary never confines itself")
	}
	return nil
}
