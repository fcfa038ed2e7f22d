package llm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"strings"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/provider"
	"github.com/kilnworks/kiln/capabilities/llm/transport"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Environment variables read when the flags are not given.
const (
	EnvUnix   = "KILN_INTEL_UNIX"
	EnvHTTP   = "KILN_INTEL_HTTP"
	EnvBearer = "KILN_INTEL_HTTP_BEARER" // the token itself
)

// config is the family's command-line configuration.
type config struct {
	unix       string
	httpURL    string
	bearerFile string
	// routeAll sends named backends to the default transport too, so
	// provider-backed workflows run against `kiln intel-mock`.
	routeAll bool
}

var flags config

func extension() runtime.Extension {
	return runtime.Extension{
		Name: "llm",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&flags.unix, "intel-unix", "", "Unix socket of the default intelligence backend (env "+EnvUnix+")")
			fs.StringVar(&flags.httpURL, "intel-http", "", "URL of the default intelligence backend over HTTP (env "+EnvHTTP+")")
			fs.StringVar(&flags.bearerFile, "intel-http-bearer-file", "", "file holding the bearer token for --intel-http (env "+EnvBearer+" holds the token itself)")
			fs.BoolVar(&flags.routeAll, "intel-route-all", false, "send every intelligence backend, named [[intelligence.backends]] too, to the --intel-unix/--intel-http transport (development: run against kiln intel-mock)")
		},
		Setup:     func(ctx context.Context, h *runtime.Host) error { return setup(h, flags, os.Getenv) },
		Listeners: readinessListeners, // ready.go
	}
}

// setup gives the host its intelligence backends (intel.SetClient), unless
// something (the fixture runner's mock) already did: "default" is the configured transport, other
// names are the [[intelligence.backends]] of the program and its children.
func setup(h *runtime.Host, cfg config, getenv func(string) string) error {
	if h.Engine.Services == nil {
		h.Engine.Services = &runtime.Services{}
	}
	svc := h.Engine.Services
	if intel.ClientFrom(svc) != nil {
		return nil
	}
	def, err := defaultTransport(cfg, getenv)
	if err != nil {
		return err
	}
	if cfg.routeAll {
		if def == nil {
			return fmt.Errorf("--intel-route-all needs --intel-unix or --intel-http")
		}
		intel.SetClient(svc, func(string) (intel.Client, error) { return def, nil })
		setProbeTargets(svc, def, nil)
		return nil
	}
	backends, err := collectBackends(h.Program, map[string]workflow.Backend{})
	if err != nil {
		return err
	}
	// The secrets family may fill Services.Secret after this Setup runs,
	// so it is looked up at request time.
	secret := func(name string) (string, error) {
		if svc.Secret == nil {
			return "", errors.New("no secrets registry")
		}
		return svc.Secret(name)
	}
	clients := map[string]intel.Client{}
	for _, name := range runtime.SortedKeys(backends) {
		c, err := provider.New(backends[name], secret)
		if err != nil {
			return fmt.Errorf("[[intelligence.backends]]: %w", err)
		}
		clients[name] = c
	}
	intel.SetClient(svc, func(name string) (intel.Client, error) {
		if name == "default" && def != nil {
			return def, nil
		}
		if c, ok := clients[name]; ok {
			return c, nil
		}
		return nil, fmt.Errorf("backend %q is not configured: %s", name, configureHint)
	})
	setProbeTargets(svc, def, backends)
	return nil
}

// defaultTransport builds the `default` backend from flags, then env; nil
// when neither names one.
func defaultTransport(cfg config, getenv func(string) string) (intel.Client, error) {
	unixPath, httpURL := cfg.unix, cfg.httpURL
	if unixPath == "" && httpURL == "" {
		unixPath, httpURL = getenv(EnvUnix), getenv(EnvHTTP)
	}
	if unixPath != "" && httpURL != "" {
		return nil, fmt.Errorf("the default intelligence backend is set twice (--intel-unix/%s and --intel-http/%s): keep one", EnvUnix, EnvHTTP)
	}
	if cfg.bearerFile != "" && httpURL == "" {
		return nil, fmt.Errorf("--intel-http-bearer-file needs --intel-http")
	}
	if unixPath != "" {
		return &transport.Unix{Path: unixPath}, nil
	}
	if httpURL == "" {
		return nil, nil
	}
	u, err := url.Parse(httpURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--intel-http %q is not an absolute http(s) URL", httpURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("--intel-http must not carry credentials in the URL; use --intel-http-bearer-file or %s", EnvBearer)
	}
	bearer := getenv(EnvBearer)
	if cfg.bearerFile != "" {
		data, err := os.ReadFile(cfg.bearerFile)
		if err != nil {
			return nil, fmt.Errorf("--intel-http-bearer-file: %v", err)
		}
		bearer = strings.TrimSpace(string(data))
		if bearer == "" {
			return nil, fmt.Errorf("--intel-http-bearer-file %s is empty", cfg.bearerFile)
		}
	}
	if bearer != "" {
		runtime.RedactValue(bearer)
	}
	return &transport.HTTP{URL: httpURL, Bearer: bearer}, nil
}

// collectBackends gathers the named backends of p and its children; one
// name declared twice with different settings is an error.
func collectBackends(p *runtime.Program, into map[string]workflow.Backend) (map[string]workflow.Backend, error) {
	if in := p.Workflow.Intelligence; in != nil {
		for _, b := range in.Backends {
			if prev, ok := into[b.Name]; ok && !reflect.DeepEqual(prev, b) {
				return nil, fmt.Errorf("[[intelligence.backends]]: backend %q is declared twice with different settings (workflow %s)", b.Name, p.Workflow.Name)
			}
			into[b.Name] = b
		}
	}
	for _, path := range runtime.SortedKeys(p.Children) {
		if _, err := collectBackends(p.Children[path], into); err != nil {
			return nil, err
		}
	}
	return into, nil
}
