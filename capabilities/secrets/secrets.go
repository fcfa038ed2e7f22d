// Package secrets is the [[secrets]] registry. Its extension's Setup
// resolves every declared secret at start-up (fail closed: a secret that
// cannot be resolved stops the process with an error naming it, never its
// value), installs Services.Secret, and re-resolves everything on SIGHUP
// (keeping the previous values if any source fails then). Every value is
// registered with runtime.RedactValue before it can reach anything else.
//
// Sources:
//   - env:     the environment variable `var`, read at (re)resolution.
//   - file:    the file `path`, re-read on every use (rotation without a
//     restart); surrounding whitespace trimmed unless trim = false.
//   - command: `argv` run without a shell (argv[0] absolute), with the
//     process environment and a 30 s limit; its trimmed stdout is cached
//     until SIGHUP. Its output never appears in errors.
//   - oauth2:  client-credentials grant against `token_url` (https, or
//     http to a loopback host), client id and secret from the environment
//     variables client_id_env / client_secret_env, `scopes`,
//     `extra_params`, auth_style body (default) or basic; the access token
//     is cached until its expiry minus skew_secs (default 60) and fetched
//     again on the next use after that.
//
// Entries of child workflows (call, parallel, map) join the registry; one
// name declared differently in two workflows is refused. A name with no
// [[secrets]] entry falls back to the lookup installed before (the
// environment variable of that name).
package secrets

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/wfpath"
	secretsspec "github.com/kilnworks/kiln/capabilities/secrets/spec"
	"github.com/kilnworks/kiln/capabilities/secrets/tokenrefresh"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	runtime.RegisterExtension(runtime.Extension{
		Name:  "secrets",
		Setup: setup,
		Close: closeActive,
	})
}

// Registry resolves the secrets of one workflow.
type Registry struct {
	specs    map[string]workflow.Secret
	dirs     map[string]string // secret name -> its workflow's directory (relative file paths)
	fallback func(string) (string, error)
	// Now is the clock oauth2 expiry is measured with (tests inject one).
	Now func() time.Time

	mu     sync.Mutex
	cached map[string]cachedValue // env, command, oauth2
	// tokenURLs replace an oauth2 entry's token_url after a client
	// discovered its server's authorization server (Retarget).
	tokenURLs map[string]string
}

type cachedValue struct {
	value   string
	expires time.Time // oauth2 only; zero = until the next reload
}

// New builds a registry for wf's [[secrets]]; fallback serves undeclared
// names (nil: runtime.EnvSecret). Nothing is resolved until Load.
func New(wf *workflow.Workflow, fallback func(string) (string, error)) (*Registry, error) {
	r := &Registry{specs: map[string]workflow.Secret{}, dirs: map[string]string{}, fallback: fallback,
		Now: time.Now, cached: map[string]cachedValue{}, tokenURLs: map[string]string{}}
	if r.fallback == nil {
		r.fallback = runtime.EnvSecret
	}
	if err := r.add(wf, map[*workflow.Workflow]bool{}); err != nil {
		return nil, err
	}
	return r, nil
}

// add registers the entries of wf and its children.
func (r *Registry) add(wf *workflow.Workflow, seen map[*workflow.Workflow]bool) error {
	if seen[wf] {
		return nil
	}
	seen[wf] = true
	where := wf.Name
	if wf.Source != "" {
		where = wf.Source
	}
	local := map[string]bool{}
	for i, s := range wf.Secrets {
		if err := check(s); err != nil {
			return fmt.Errorf("%s: secrets[%d] %q: %v", where, i, s.Name, err)
		}
		if local[s.Name] {
			return fmt.Errorf("%s: secrets[%d] %q: declared more than once", where, i, s.Name)
		}
		local[s.Name] = true
		if prev, ok := r.specs[s.Name]; ok && !sameSecret(prev, s) {
			return fmt.Errorf("%s: secrets[%d] %q: declared differently by another workflow of this run", where, i, s.Name)
		}
		r.specs[s.Name] = s
		if _, ok := r.dirs[s.Name]; !ok && wf.Source != "" {
			r.dirs[s.Name] = filepath.Dir(wf.Source)
		}
	}
	for _, path := range runtime.SortedKeys(wf.Children) {
		if err := r.add(wf.Children[path], seen); err != nil {
			return err
		}
	}
	return nil
}

func sameSecret(a, b workflow.Secret) bool {
	x, _ := runtime.EncodeJSON(a)
	y, _ := runtime.EncodeJSON(b)
	return string(x) == string(y)
}

// check validates one entry's fields for its source with the generator's
// rules (capabilities/secrets/spec), then what only the registry knows: an
// OAuth2 token endpoint must be https or loopback.
func check(s workflow.Secret) error {
	if s.Name == "" {
		return fmt.Errorf("name is required")
	}
	if err := spec.Err(secretsspec.CheckSecret(&s)); err != nil {
		return err
	}
	if s.Source == "oauth2" {
		return checkTokenURL(s.TokenURL)
	}
	return nil
}

// Names lists the declared secrets.
func (r *Registry) Names() []string { return runtime.SortedKeys(r.specs) }

// Load resolves every declared secret. On success the new values replace
// the cached ones; on failure nothing changes and the error names the
// first secret that failed.
func (r *Registry) Load(ctx context.Context) error {
	fresh := map[string]cachedValue{}
	for _, name := range r.Names() {
		s := r.specs[name]
		r.mu.Lock()
		if u, ok := r.tokenURLs[name]; ok { // a reload keeps a discovered endpoint
			s.TokenURL = u
		}
		r.mu.Unlock()
		v, err := r.resolve(ctx, s)
		if err != nil {
			return fmt.Errorf("secret %s (%s): %v", name, s.Source, err)
		}
		// By name, so that a short value is reported under it.
		runtime.RedactSecret(name, v.value)
		if s.Source != "file" { // files are re-read on every use
			fresh[name] = v
		}
	}
	r.mu.Lock()
	r.cached = fresh
	r.mu.Unlock()
	return nil
}

// Secret returns the current value of name.
func (r *Registry) Secret(name string) (string, error) {
	s, ok := r.specs[name]
	if !ok {
		return r.fallback(name)
	}
	if s.Source == "file" {
		v, err := r.readFile(name, s)
		if err != nil {
			return "", fmt.Errorf("secret %s (file): %v", name, err)
		}
		return v.value, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cached[name]
	if ok && (c.expires.IsZero() || r.Now().Before(c.expires)) {
		return c.value, nil
	}
	if s.Source != "oauth2" {
		return "", fmt.Errorf("secret %s was not resolved at start-up", name)
	}
	// An expired token: fetch a new one (under the lock, so concurrent
	// callers share one fetch).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if u, ok := r.tokenURLs[name]; ok {
		s.TokenURL = u
	}
	fresh, err := r.fetchToken(ctx, s)
	if err != nil {
		return "", fmt.Errorf("secret %s (oauth2): %v", name, err)
	}
	r.cached[name] = fresh
	return fresh.value, nil
}

// Refused drops an oauth2 token a server refused, so that the next use
// fetches a new one. A token that is no longer the cached one (another
// caller already refreshed it) is left alone, so concurrent refusals
// cause one fetch.
func (r *Registry) Refused(name, value string) {
	if s, ok := r.specs[name]; !ok || s.Source != "oauth2" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cached[name]; ok && c.value == value {
		delete(r.cached, name)
	}
}

// Retarget makes tokenURL the token endpoint of the oauth2 entry name
// (its client credentials unchanged) and drops its cached token. The
// caller has checked that tokenURL is allowed; the registry still
// requires https, or http to a loopback host.
func (r *Registry) Retarget(name, tokenURL string) error {
	if s, ok := r.specs[name]; !ok || s.Source != "oauth2" {
		return fmt.Errorf("secret %s is not an oauth2 entry of [[secrets]]", name)
	}
	if err := checkTokenURL(tokenURL); err != nil {
		return fmt.Errorf("secret %s (oauth2): %v", name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tokenURLs[name] != tokenURL {
		r.tokenURLs[name] = tokenURL
		delete(r.cached, name)
	}
	return nil
}

func (r *Registry) resolve(ctx context.Context, s workflow.Secret) (cachedValue, error) {
	switch s.Source {
	case "env":
		v := os.Getenv(s.Var)
		if v == "" {
			return cachedValue{}, fmt.Errorf("environment variable %s is unset or empty", s.Var)
		}
		runtime.RedactValue(v)
		return cachedValue{value: v}, nil
	case "file":
		return r.readFile(s.Name, s)
	case "command":
		return runCommand(ctx, s.Argv)
	case "oauth2":
		return r.fetchToken(ctx, s)
	}
	return cachedValue{}, fmt.Errorf("unknown source %q", s.Source)
}

// path resolves a relative file path against the directory of the
// workflow declaring the secret first, then the working directory.
func (r *Registry) path(name, p string) string { return wfpath.Resolve(r.dirs[name], p) }

func (r *Registry) readFile(name string, s workflow.Secret) (cachedValue, error) {
	p := r.path(name, s.Path)
	data, err := os.ReadFile(p)
	if err != nil {
		return cachedValue{}, fmt.Errorf("cannot read %s: %v", p, pathErr(err))
	}
	v := string(data)
	if s.Trim == nil || *s.Trim {
		v = strings.TrimSpace(v)
	}
	if v == "" {
		return cachedValue{}, fmt.Errorf("%s is empty", p)
	}
	runtime.RedactValue(v)
	return cachedValue{value: v}, nil
}

// pathErr drops the path os errors repeat.
func pathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

var (
	activeMu sync.Mutex
	stopHUP  func()
)

func setup(ctx context.Context, h *runtime.Host) error {
	if h.Engine.Services == nil {
		h.Engine.Services = &runtime.Services{}
	}
	svc := h.Engine.Services
	reg, err := New(h.Program.Workflow, svc.Secret)
	if err != nil {
		return err
	}
	if err := reg.Load(ctx); err != nil {
		return err
	}
	svc.Secret = reg.Secret
	tokenrefresh.Install(svc, reg.Refused, reg.Retarget)
	if len(reg.specs) == 0 {
		return nil
	}
	audit := h.Engine.Audit
	if audit != nil {
		audit.Info("secrets.resolved", "secrets", strings.Join(reg.Names(), ","))
	}
	// SIGHUP re-resolves everything; a failure keeps the previous values.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				err := reg.Load(rctx)
				cancel()
				if audit == nil {
					continue
				}
				if err != nil {
					audit.Warn("secrets.reload_failed", "error", err.Error(), "detail", "previous values kept")
				} else {
					audit.Info("secrets.reloaded", "secrets", strings.Join(reg.Names(), ","))
				}
			}
		}
	}()
	activeMu.Lock()
	if stopHUP != nil {
		stopHUP()
	}
	stopHUP = func() { signal.Stop(hup); close(done) }
	activeMu.Unlock()
	return nil
}

func closeActive() error {
	activeMu.Lock()
	defer activeMu.Unlock()
	if stopHUP != nil {
		stopHUP()
		stopHUP = nil
	}
	return nil
}
