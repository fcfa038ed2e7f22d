package llm

import (
	"context"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/provider"
	"github.com/kilnworks/kiln/capabilities/llm/transport"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Readiness of the intelligence backends (docs/operations.md): in serve
// mode each declared backend's endpoint is probed with a bare connection
// (TCP, or the Unix socket of --intel-unix) every probeEvery, bounded by
// probeTimeout; /readyz answers from the last result, so a probe of
// /readyz never reaches a backend, and no prompt or credential is ever
// sent.
var (
	probeEvery   = 5 * time.Second
	probeTimeout = 2 * time.Second
)

// probeTarget is the endpoint of one backend.
type probeTarget struct {
	name    string // "default" or the [[intelligence.backends]] name
	network string // tcp | unix
	addr    string
}

func (t probeTarget) readyKey() string { return "intelligence backend " + t.name }

type probeTargetsKey struct{}

// setProbeTargets records the endpoints setup configured: the default
// transport, and the named backends unless they all go to it.
func setProbeTargets(svc *runtime.Services, def intel.Client, backends map[string]workflow.Backend) {
	var out []probeTarget
	switch d := def.(type) {
	case *transport.Unix:
		out = append(out, probeTarget{name: "default", network: "unix", addr: d.Path})
	case *transport.HTTP:
		if addr, ok := hostPort(d.URL); ok {
			out = append(out, probeTarget{name: "default", network: "tcp", addr: addr})
		}
	}
	for _, name := range runtime.SortedKeys(backends) {
		if addr, ok := hostPort(provider.BaseURL(backends[name])); ok {
			out = append(out, probeTarget{name: name, network: "tcp", addr: addr})
		}
	}
	svc.Values.Store(probeTargetsKey{}, out)
}

// hostPort is the TCP address of an http(s) URL.
func hostPort(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case u.Scheme == "http":
		port = "80"
	default:
		return "", false
	}
	return net.JoinHostPort(u.Hostname(), port), true
}

// readinessListeners holds readiness until each declared backend answered
// a first probe, and returns the listener that keeps probing them.
func readinessListeners(h *runtime.Host) ([]runtime.Listener, error) {
	if h.Engine.Services == nil {
		return nil, nil
	}
	v, _ := h.Engine.Services.Values.Load(probeTargetsKey{})
	targets, _ := v.([]probeTarget)
	if len(targets) == 0 {
		return nil, nil
	}
	for _, t := range targets {
		h.BlockReady(t.readyKey(), "not probed yet")
	}
	return []runtime.Listener{&readiness{host: h, targets: targets}}, nil
}

// readiness probes the backends. It serves no runs, so it stops last,
// with the ops listener.
type readiness struct {
	host    *runtime.Host
	targets []probeTarget
}

func (l *readiness) Name() string { return "llm-readiness" }

// StopsLast: see runtime.Listener users in the CLI's serve loop.
func (l *readiness) StopsLast() {}

func (l *readiness) Serve(ctx context.Context) error {
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		l.probeAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (l *readiness) probeAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range l.targets {
		wg.Go(func() {
			err := probe(ctx, t)
			switch {
			case ctx.Err() != nil: // stopping: leave the last result
			case err != nil:
				l.host.BlockReady(t.readyKey(), runtime.Redact(t.network+" "+t.addr+" unreachable"))
			default:
				l.host.UnblockReady(t.readyKey())
			}
		})
	}
	wg.Wait()
}

// probe opens and closes one connection to the target.
func probe(ctx context.Context, t probeTarget) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, t.network, t.addr)
	if err != nil {
		return err
	}
	return c.Close()
}
