package discovery

import "github.com/kilnworks/kiln/runtime"

// Self is what the running program knows about its own build, beyond the
// workflow: the serve-mode documents report it. The run CLI attaches it
// to the host at start-up (runtime/cli), the HTTP family reads it.
type Self struct {
	Version string
	// Families maps each linked capability family to its keys.
	Families map[string][]string
	// Degraded lists the capability keys this build leaves out.
	Degraded []string
}

type selfKey struct{}

// Attach records s on the host.
func Attach(h *runtime.Host, s Self) {
	if h == nil || h.Engine == nil {
		return
	}
	if h.Engine.Services == nil {
		h.Engine.Services = &runtime.Services{}
	}
	h.Engine.Services.Values.Store(selfKey{}, s)
}

// Attached returns what Attach recorded on the host.
func Attached(h *runtime.Host) (Self, bool) {
	if h == nil || h.Engine == nil || h.Engine.Services == nil {
		return Self{}, false
	}
	v, ok := h.Engine.Services.Values.Load(selfKey{})
	if !ok {
		return Self{}, false
	}
	return v.(Self), true
}
