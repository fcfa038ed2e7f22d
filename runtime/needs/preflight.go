package needs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime/confine"
)

// Need statuses (docs/needs.md).
const (
	Satisfied        = "satisfied"
	Missing          = "missing"
	ApprovalRequired = "approval_required"
	ReauthRequired   = "reauth_required"
	Unsupported      = "unsupported"
)

// Report statuses.
const (
	Ready    = "ready"    // every need satisfied
	Blocked  = "blocked"  // a mandatory need is unmet: run and serve refuse to start
	Degraded = "degraded" // only optional needs are unmet, or the build is degraded
)

// Action is the typed next step that would satisfy an unmet need.
type Action struct {
	Type       string   `json:"type"` // provide_secret | connect_oauth | reauthorize_oauth | approve_network_access | approve_filesystem_access | approve_capability | rebuild_with_capability
	SecretKey  string   `json:"secret_key,omitempty"`
	Provider   string   `json:"provider,omitempty"`
	Scopes     []string `json:"scopes,omitempty"`
	Host       string   `json:"host,omitempty"`
	Path       string   `json:"path,omitempty"`
	Mode       string   `json:"mode,omitempty"`
	Capability string   `json:"capability,omitempty"`
}

// Item is one evaluated need.
type Item struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"`
	Label    string   `json:"label,omitempty"`
	Source   []string `json:"source"`
	Optional bool     `json:"optional"`
	Status   string   `json:"status"`
	Action   *Action  `json:"action,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// Report is the preflight result printed by `<bin> needs`.
type Report struct {
	Status string `json:"status"`
	Needs  []Item `json:"needs"`
	// Sandbox is the Landlock confinement the start-up will apply
	// (docs/sandbox.md); nil when the caller did not plan one.
	Sandbox *confine.Report `json:"sandbox,omitempty"`
}

// Approvals is the operator's --approvals file. It can only mark needs as
// approved; it never widens what the compiled policy allows.
type Approvals struct {
	Network      []string             `toml:"network"`
	Capabilities []string             `toml:"capabilities"`
	Filesystem   []FilesystemApproval `toml:"filesystem"`
	OAuth        []OAuthGrant         `toml:"oauth"`
}

// FilesystemApproval approves a path (and everything under it) in a mode.
type FilesystemApproval struct {
	Path string `toml:"path"`
	Mode string `toml:"mode"` // ro | rw (rw also covers ro)
}

// OAuthGrant records a connected account and the scopes it granted.
type OAuthGrant struct {
	Provider string   `toml:"provider"`
	Scopes   []string `toml:"scopes"`
}

// LoadApprovals strictly decodes an approvals file.
func LoadApprovals(path string) (*Approvals, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	a, err := decodeApprovals(string(data)) // approvals.go: no TOML library in sealed binaries
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, f := range a.Filesystem {
		if f.Mode != "ro" && f.Mode != "rw" {
			return nil, fmt.Errorf("%s: filesystem approval %q: mode must be \"ro\" or \"rw\"", path, f.Path)
		}
	}
	return a, nil
}

// Env is what preflight checks needs against.
type Env struct {
	// HasSecret reports whether a secret key can be resolved (environment
	// or a [[secrets]] source). It must not return the value.
	HasSecret func(key string) bool
	// Approvals is the operator's approvals file (nil = nothing approved).
	Approvals *Approvals
	// Capabilities reports whether a capability type is provided by this
	// binary (nil = every capability is provided).
	Capabilities func(typ string) bool
	// DegradedBuild marks a binary built with --degrade.
	DegradedBuild bool
}

// Evaluate checks every need and returns the report. Status is blocked
// when any mandatory need is unmet.
func Evaluate(e *Effective, env Env) *Report {
	r := &Report{Needs: []Item{}}
	blocked, degraded := false, env.DegradedBuild
	for _, n := range e.Needs {
		it := Item{ID: n.ID, Kind: n.Kind, Label: n.Label, Source: n.Sources, Optional: n.Optional}
		if it.Source == nil {
			it.Source = []string{}
		}
		evaluate(&n, &it, env)
		if it.Status != Satisfied {
			if n.Optional {
				degraded = true
			} else {
				blocked = true
			}
		}
		r.Needs = append(r.Needs, it)
	}
	sort.Slice(r.Needs, func(i, j int) bool { return r.Needs[i].ID < r.Needs[j].ID })
	switch {
	case blocked:
		r.Status = Blocked
	case degraded:
		r.Status = Degraded
	default:
		r.Status = Ready
	}
	return r
}

func evaluate(n *Need, it *Item, env Env) {
	a := env.Approvals
	if a == nil {
		a = &Approvals{}
	}
	it.Status = Satisfied
	switch n.Kind {
	case KindSecret:
		if env.HasSecret == nil || !env.HasSecret(n.Key) {
			it.Status = Missing
			it.Action = &Action{Type: "provide_secret", SecretKey: n.Key}
		}
	case KindOAuth:
		granted, connected := oauthGrant(a, n.Provider)
		switch {
		case !connected:
			it.Status = Missing
			it.Action = &Action{Type: "connect_oauth", Provider: n.Provider, Scopes: n.Scopes}
		case !covers(granted, n.Scopes):
			it.Status = ReauthRequired
			it.Action = &Action{Type: "reauthorize_oauth", Provider: n.Provider, Scopes: n.Scopes}
		}
	case KindCapability:
		if env.Capabilities != nil && !env.Capabilities(n.Type) {
			it.Status = Unsupported
			it.Action = &Action{Type: "rebuild_with_capability", Capability: n.Type}
			it.Detail = "capability not compiled into this binary"
		} else if !contains(a.Capabilities, n.Type) {
			it.Status = ApprovalRequired
			it.Action = &Action{Type: "approve_capability", Capability: n.Type}
		}
	case KindNetwork:
		if !hostApproved(a.Network, n.Host) {
			it.Status = ApprovalRequired
			it.Action = &Action{Type: "approve_network_access", Host: n.Host}
		}
	case KindFilesystem:
		if !pathApproved(a.Filesystem, n.Path, n.Mode) {
			it.Status = ApprovalRequired
			it.Action = &Action{Type: "approve_filesystem_access", Path: n.Path, Mode: n.Mode}
		}
	default:
		it.Status = Unsupported
		it.Detail = "unknown need kind " + n.Kind
	}
	if n.BeyondPolicy != "" && it.Status == Satisfied {
		// An approval can never widen the compiled policy.
		it.Status = ApprovalRequired
		it.Detail = "beyond the workflow's [policy]: " + n.BeyondPolicy
		if it.Action == nil {
			it.Action = &Action{Type: "approve_" + n.Kind + "_access", Host: n.Host, Path: n.Path, Mode: n.Mode}
		}
	}
}

func oauthGrant(a *Approvals, provider string) ([]string, bool) {
	for _, g := range a.OAuth {
		if g.Provider == provider {
			return g.Scopes, true
		}
	}
	return nil, false
}

func covers(granted, wanted []string) bool {
	for _, w := range wanted {
		if !contains(granted, w) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hostApproved matches exact hosts and "*.example.com" wildcards.
func hostApproved(approved []string, host string) bool {
	for _, h := range approved {
		if strings.EqualFold(h, host) {
			return true
		}
		if suffix, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(strings.ToLower(host), "."+strings.ToLower(suffix)) {
			return true
		}
	}
	return false
}

// pathApproved: an approval of DIR covers DIR and everything under it; an
// "rw" approval covers "ro" needs, never the reverse.
func pathApproved(approved []FilesystemApproval, path, mode string) bool {
	clean := filepath.Clean(path)
	for _, f := range approved {
		if mode == "rw" && f.Mode != "rw" {
			continue
		}
		base := filepath.Clean(f.Path)
		if clean == base || strings.HasPrefix(clean, base+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
