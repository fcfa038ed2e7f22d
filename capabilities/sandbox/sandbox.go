// Package sandbox confines a binary that has a [policy] with Landlock: at
// start-up, before its first node runs, the process hands the kernel a
// ruleset derived from its compiled policy and needs (file system rights,
// TCP ports, IPC scoping), which binds every thread and every child it
// starts, and cannot be lifted. kiln's own checks stay in front; this is
// the layer that holds when one of them has a bug (docs/sandbox.md).
package sandbox

import (
	"fmt"
	"os"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/kilnworks/kiln/capabilities/sandbox/spec"
	"github.com/kilnworks/kiln/runtime/confine"
)

func init() {
	confine.Register(confine.Sandbox{Plan: Plan, Apply: Apply})
	// The local time zone is read lazily, from files the ruleset does not
	// grant: it is loaded before Apply confines the process. Loaded here,
	// its 4 KiB read buffer lands on the shallow stack of package
	// initialisation rather than below the run CLI's frames, where it
	// would grow the main goroutine's stack.
	_ = time.Local.String()
}

// fullABI is the first Landlock ABI that enforces every kind of rule kiln
// derives: file system (with truncate and device ioctl), TCP ports and
// IPC scoping. landlock = "required" refuses anything older.
const fullABI = 6

// configs are the go-landlock presets by ABI: the ruleset handles what
// the detected ABI supports and no more, so the report is exact.
var configs = []landlock.Config{{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7}

// detectABI returns the kernel's usable Landlock ABI (0: none). Tests
// replace it to simulate a kernel without Landlock.
var detectABI = kernelABI

// kernelABI asks the kernel. Like go-landlock, it counts ABI 6 and later
// as 5 while the kernel lacks the signal scoping fix (erratum 2), since
// the library then does not scope.
func kernelABI() int {
	v, err := ll.LandlockGetABIVersion()
	return usableABI(v, err, ll.LandlockGetErrata)
}

// usableABI is kernelABI's decision on what the kernel answered: no
// Landlock (an error or a negative version) is 0, ABI 6 and later count
// as 5 without erratum 2, and a newer kernel as the newest preset.
func usableABI(v int, err error, errata func() (int, error)) int {
	if err != nil || v < 0 {
		return 0
	}
	if v >= 6 {
		if e, err := errata(); err != nil || e&2 == 0 {
			v = 5
		}
	}
	return min(v, len(configs)-1)
}

// Plan returns what Apply would enforce on this machine.
func Plan(req confine.Request) *confine.Report {
	r, _ := build(req, false)
	r.Detail = "planned: applied at start-up, before the first node runs"
	return r
}

// Apply confines the process, every thread and every future child.
func Apply(req confine.Request) (*confine.Report, error) {
	r, b := build(req, true)
	if r.Refused != "" {
		return r, fmt.Errorf("%w: %s", confine.ErrRequired, r.Refused)
	}
	if r.ABI == 0 {
		r.Detail = "not confined: this kernel has no Landlock"
		return r, nil
	}
	_ = time.Local.String() // loaded by init already; see there
	if err := b.cfg.Restrict(b.rules...); err != nil {
		return r, fmt.Errorf("landlock: %w", err)
	}
	r.Confined = true
	return r, nil
}

// ruleset is what Apply hands to go-landlock.
type ruleset struct {
	cfg   landlock.Config
	rules []landlock.Rule
}

// build derives the ruleset of req for the detected ABI and its report;
// apply creates missing fs.write directories (see writeRoots).
func build(req confine.Request, apply bool) (*confine.Report, ruleset) {
	abi := detectABI()
	p := derive(req, os.Getenv, apply && abi > 0)
	r := &confine.Report{Mode: spec.Mode(req.Workflow), ABI: abi, NotEnforced: p.notEnforced}
	cfg := configs[abi]
	if p.anyConnect {
		cfg.HandledAccessNet &^= ll.AccessNetConnectTCP
	}
	if p.anyBind {
		cfg.HandledAccessNet &^= ll.AccessNetBindTCP
	}
	var rules []landlock.Rule
	if abi == 0 {
		p.paths, p.connect, p.bind = nil, nil, nil // nothing can be enforced
	}
	for _, pr := range p.paths {
		access := landlock.AccessFSSet(pr.access) & cfg.HandledAccessFS
		rules = append(rules, landlock.PathAccess(access, pr.path))
		kind := "file"
		if pr.dir {
			kind = "tree"
		}
		r.Rules = append(r.Rules, fmt.Sprintf("%s %s: %v (%s)", kind, pr.path, access, pr.why))
	}
	if cfg.HandledAccessNet&ll.AccessNetConnectTCP != 0 {
		for _, port := range p.connect {
			rules = append(rules, landlock.ConnectTCP(port))
			r.Rules = append(r.Rules, fmt.Sprintf("tcp connect %d", port))
		}
	}
	if cfg.HandledAccessNet&ll.AccessNetBindTCP != 0 {
		for _, port := range p.bind {
			rules = append(rules, landlock.BindTCP(port))
			r.Rules = append(r.Rules, fmt.Sprintf("tcp bind %d", port))
		}
	}
	r.Enforced, r.NotEnforced = coverage(cfg, abi, r.NotEnforced)
	if r.Mode == spec.Required && abi < fullABI {
		r.Refused = fmt.Sprintf("this kernel's Landlock ABI is %d; enforcing file system, TCP port and scoping rules needs %d or later", abi, fullABI)
	}
	return r, ruleset{cfg: cfg.BestEffort(), rules: rules}
}

// coverage lists what cfg enforces and, appended to notEnforced, what the
// kernel's ABI leaves out.
func coverage(cfg landlock.Config, abi int, notEnforced []string) (enforced, not []string) {
	not = notEnforced
	if abi == 0 {
		return nil, append(not, "everything: this kernel has no Landlock")
	}
	enforced = append(enforced, "fs")
	if abi < 3 {
		not = append(not, "fs truncate: Landlock ABI 3 or later")
	}
	if abi < 5 {
		not = append(not, "device ioctl: Landlock ABI 5 or later")
	}
	if cfg.HandledAccessNet&ll.AccessNetConnectTCP != 0 {
		enforced = append(enforced, "net.connect")
	}
	if cfg.HandledAccessNet&ll.AccessNetBindTCP != 0 {
		enforced = append(enforced, "net.bind")
	}
	if abi < 4 {
		not = append(not, "TCP connect and bind ports: Landlock ABI 4 or later")
	}
	if cfg.Scoped&ll.ScopeAbstractUnixSocket != 0 {
		enforced = append(enforced, "scope.abstract_unix_socket")
	}
	if cfg.Scoped&ll.ScopeSignal != 0 {
		enforced = append(enforced, "scope.signal")
	}
	if abi < 6 {
		not = append(not, "abstract Unix socket and signal scoping: Landlock ABI 6 or later")
	}
	// What no Landlock ABI this library targets can express.
	not = append(not, "host names: only TCP ports are restricted", "UDP and Multipath TCP sockets")
	return enforced, not
}
