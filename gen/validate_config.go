package gen

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	httpspec "github.com/kilnworks/kiln/capabilities/http/spec"
	regocompile "github.com/kilnworks/kiln/capabilities/rego/compile"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var (
	routeMethods  = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true, "OPTIONS": true}
	capabilityRe  = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)*$`)
	bindingNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	httpMethodRe  = regexp.MustCompile(`^[A-Z]+$`)
)

func (c *checker) checkCapabilities() {
	seen := map[string]bool{}
	for _, cap := range c.wf.RequiresCapabilities {
		switch {
		case !capabilityRe.MatchString(cap):
			c.add("invalid_capability", "requires_capabilities: %q is not a dotted lower-case name such as \"fs.read\"", cap)
		case seen[cap]:
			c.add("duplicate_capability", "requires_capabilities: %q is listed twice", cap)
		}
		seen[cap] = true
	}
}

func (c *checker) checkRoutes() {
	seen := map[string]bool{}
	for i, r := range c.wf.HTTPRoutes {
		where := fmt.Sprintf("route %s %s", r.Method, r.Path)
		if r.Method == "" || r.Path == "" {
			where = fmt.Sprintf("http_routes[%d]", i)
		}
		switch {
		case r.Method == "":
			c.add("missing_field", "%s: method is required", where)
		case !routeMethods[r.Method]:
			c.add("invalid_route", "%s: method %q must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS", where, r.Method)
		}
		switch {
		case r.Path == "":
			c.add("missing_field", "%s: path is required", where)
		case !strings.HasPrefix(r.Path, "/") || strings.ContainsAny(r.Path, " \t\r\n?#"):
			c.add("invalid_route", "%s: path %q must start with / and hold no spaces, query or fragment", where, r.Path)
		case httpspec.IsReservedPath(r.Path):
			c.add("invalid_route", "%s: path %q is served by the runtime itself", where, r.Path)
		default:
			c.addAll(where, httpspec.CheckRoutePath(r.Method, r.Path))
		}
		key := r.Method + " " + r.Path
		if r.Method != "" && r.Path != "" && seen[key] {
			c.add("duplicate_route", "%s: declared more than once", where)
		}
		seen[key] = true
		c.checkStartRef(where, r.StartNode)
		c.checkAuthRef(where, r.Auth)
		if rl := r.RateLimit; rl != nil {
			if rl.Capacity < 1 {
				c.add("invalid_rate_limit", "%s: rate_limit.capacity must be at least 1, got %d", where, rl.Capacity)
			}
			if !(rl.PerSecond > 0) || math.IsInf(rl.PerSecond, 0) {
				c.add("invalid_rate_limit", "%s: rate_limit.per_second must be a positive number, got %v", where, rl.PerSecond)
			}
		}
		if k := r.IdempotencyKey; k != "" && k != "body_sha256" && !spec.ValidPath(k) {
			c.add("invalid_idempotency_key", "%s: idempotency_key %q must be a dotted payload path or \"body_sha256\"", where, k)
		}
		if r.IdempotencyTTLSecs != nil {
			if r.IdempotencyKey == "" {
				c.add("invalid_idempotency_key", "%s: idempotency_ttl_secs is set without idempotency_key", where)
			} else if *r.IdempotencyTTLSecs < 1 {
				c.add("out_of_range", "%s: idempotency_ttl_secs must be at least 1, got %d", where, *r.IdempotencyTTLSecs)
			}
		}
		if r.InputSchema != "" {
			c.addAll(where, c.ctx.Schema("input_schema", r.InputSchema))
		}
		for _, msg := range httpspec.CheckRouteHeaders(r.Headers) {
			c.add("invalid_route_headers", "%s: %s", where, msg)
		}
		c.addAll(where, httpspec.CheckRouteReply(r))
	}
	for _, cf := range httpspec.RouteConflicts(c.wf.HTTPRoutes) {
		a, b := c.wf.HTTPRoutes[cf.First], c.wf.HTTPRoutes[cf.Second]
		c.add("conflicting_routes", "http_routes[%d] (%s %s) and http_routes[%d] (%s %s) cannot be told apart: %s",
			cf.First, a.Method, a.Path, cf.Second, b.Method, b.Path, cf.Detail)
	}
}

// checkStartRef: routes and triggers start at a declared start node.
func (c *checker) checkStartRef(where, name string) {
	if name == "" {
		c.add("missing_field", "%s: start_node is required", where)
		return
	}
	if c.starts[name] == nil {
		c.add("unknown_start_node", "%s: start_node %q is not declared in [[start_nodes]]", where, name)
	}
}

// checkAuthRef checks a route's auth reference: none, or an auth kind a
// family declares (capabilities/<family>/spec), with a binding name unless
// the kind takes none. A bare kind means binding "default".
func (c *checker) checkAuthRef(where, ref string) {
	if ref == "" || ref == "none" {
		return
	}
	kind, name, hasName := strings.Cut(ref, ":")
	a, ok := all.Auth(kind)
	if ok && a.Bindings == nil && !hasName {
		c.addAll(where, a.Route(c.wf))
		return
	}
	if !hasName {
		name = "default"
	}
	if !ok || a.Bindings == nil || name == "" || !bindingNameRe.MatchString(name) || (a.NamedOnly && !hasName) {
		c.add("invalid_auth_ref", "%s: auth %q must be %s", where, ref, authForms())
		return
	}
	binds := []string(nil)
	if c.wf.Auth != nil {
		binds = a.Bindings(c.wf.Auth)
	}
	if !slices.Contains(binds, name) {
		c.add("unknown_auth_binding", "%s: auth %q needs an [auth.%s.%s] binding", where, ref, kind, name)
	}
}

// authForms lists how a route may name its auth: none, then each declared
// kind as kind (no binding), kind:name or kind[:name].
func authForms() string {
	forms := []string{"none"}
	for _, a := range all.Auths() {
		switch {
		case a.Bindings == nil:
			forms = append(forms, a.Name)
		case a.NamedOnly:
			forms = append(forms, a.Name+":name")
		default:
			forms = append(forms, a.Name+"[:name]")
		}
	}
	return strings.Join(forms[:len(forms)-1], ", ") + " or " + forms[len(forms)-1]
}

func (c *checker) serverTLS() *workflow.TLS {
	if c.wf.Server == nil {
		return nil
	}
	return c.wf.Server.TLS
}

// checkTriggers checks each trigger against its type's declaration: keys
// that do not belong, its start node, then the type's own Check.
func (c *checker) checkTriggers() {
	for i := range c.wf.Triggers {
		t := &c.wf.Triggers[i]
		where := fmt.Sprintf("triggers[%d] (%s)", i, t.Type)
		tr, ok := all.Trigger(t.Type)
		if !ok {
			c.unknownType(where, "trigger type", t.Type, all.Triggers())
			continue
		}
		c.addAll(where, spec.NotAllowed(t, tr.Keys, "type", "start_node"))
		c.checkStartRef(where, t.StartNode)
		c.addAll(where, tr.Check(t, c.ctx))
	}
}

// checkAuth checks every [auth.<kind>.<name>] binding with its kind's
// declaration.
func (c *checker) checkAuth() {
	if c.wf.Auth == nil {
		return
	}
	for _, a := range all.Auths() {
		if a.Bindings == nil {
			continue
		}
		for _, name := range a.Bindings(c.wf.Auth) {
			where := fmt.Sprintf("[auth.%s.%s]", a.Name, name)
			if !bindingNameRe.MatchString(name) {
				c.add("invalid_auth_binding", "%s: binding name must be letters, digits, _ or -", where)
			}
			c.addAll(where, a.Check(c.wf.Auth, name, c.ctx))
		}
	}
}

// checkFamilies runs each family's check of the workflow-level tables it
// owns ([[mcp_servers]], [[intelligence.backends]], [[secrets]]).
func (c *checker) checkFamilies() {
	for _, f := range all.Families() {
		if f.Check != nil {
			c.issues = append(c.issues, f.Check(c.wf, c.ctx)...)
		}
	}
}

func (c *checker) checkServer() {
	if sv := c.wf.Server; sv != nil && sv.OpsBind != "" {
		if _, port, err := net.SplitHostPort(sv.OpsBind); err != nil || port == "" {
			c.add("invalid_ops_bind", "[server]: ops_bind %q must be HOST:PORT (for example 127.0.0.1:9090)", sv.OpsBind)
		}
	}
	tls := c.serverTLS()
	if tls == nil {
		return
	}
	if tls.CertFile == "" || tls.KeyFile == "" {
		c.add("invalid_tls", "[server.tls]: cert_file and key_file are both required")
	}
	if ca := tls.ClientAuth; ca != nil {
		if ca.Mode != "required" {
			c.add("invalid_tls", "[server.tls.client_auth]: mode %q is not supported; only \"required\" is", ca.Mode)
		}
		if ca.CAFile == "" {
			c.add("invalid_tls", "[server.tls.client_auth]: ca_file is required")
		}
	}
}

var logLevels = map[string]bool{"trace": true, "debug": true, "info": true, "warn": true, "warning": true, "error": true, "off": true}

func (c *checker) checkLogging() {
	l := c.wf.Logging
	if l == nil {
		return
	}
	bad := func(format string, args ...any) { c.add("invalid_logging", format, args...) }
	// An EnvFilter directive (a=debug,b=info) is accepted as written; a
	// bare level must be one kiln knows.
	if l.Level != "" && !strings.ContainsAny(l.Level, "=,") && !logLevels[strings.ToLower(l.Level)] {
		bad("[logging]: level %q must be trace, debug, info, warn, error or off", l.Level)
	}
	if l.Format != "" && l.Format != "text" && l.Format != "json" {
		bad("[logging]: format %q must be text or json", l.Format)
	}
	if !validLogTarget(l.Target) {
		bad("[logging]: target %q must be stderr, stdout or file:PATH", l.Target)
	}
	if a := l.Audit; a != nil && !validLogTarget(a.Target) {
		bad("[logging.audit]: target %q must be stderr, stdout or file:PATH", a.Target)
	}
	switch l.Rotation {
	case "", "never":
	case "minutely", "hourly", "daily":
		// Only files rotate: on the standard streams it would be ignored.
		if !strings.HasPrefix(l.Target, "file:") && (l.Audit == nil || !strings.HasPrefix(l.Audit.Target, "file:")) {
			bad("[logging]: rotation %q needs a file:PATH target ([logging] or [logging.audit]); stderr and stdout are not rotated", l.Rotation)
		}
	default:
		bad("[logging]: rotation %q must be never, minutely, hourly or daily", l.Rotation)
	}
	if o := l.OTel; o != nil {
		if o.Endpoint != "" && !rules.HTTPURL(o.Endpoint) {
			bad("[logging.otel]: endpoint %q must be an http(s) URL", o.Endpoint)
		}
		if o.Protocol != "" && o.Protocol != "grpc" && o.Protocol != "http/protobuf" && o.Protocol != "http/json" {
			bad("[logging.otel]: protocol %q must be grpc, http/protobuf or http/json", o.Protocol)
		}
		if r := o.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
			bad("[logging.otel]: sample_ratio must be within 0.0..1.0, got %v", *r)
		}
	}
}

func validLogTarget(t string) bool {
	switch {
	case t == "", t == "stderr", t == "stdout":
		return true
	case strings.HasPrefix(t, "file:"):
		return strings.TrimSpace(strings.TrimPrefix(t, "file:")) != ""
	}
	return false
}

func (c *checker) checkSigning() {
	s := c.wf.Signing
	if s == nil {
		return
	}
	if s.Algorithm != "" && s.Algorithm != "ed25519" {
		c.add("invalid_signing", "[signing]: algorithm %q is not supported; only ed25519 is", s.Algorithm)
	}
	switch {
	case s.PublicKeyFile != "" && s.PublicKeyPEM != "":
		c.add("invalid_signing", "[signing]: set public_key_file or public_key_pem, not both")
	case s.Required && s.PublicKeyFile == "" && s.PublicKeyPEM == "":
		c.add("invalid_signing", "[signing]: required = true needs public_key_file or public_key_pem")
	}
}

func (c *checker) checkBudget() {
	b := c.wf.Budget
	if b == nil {
		return
	}
	for _, f := range []struct {
		key string
		v   int64
	}{
		{"max_memory_mb", b.MaxMemoryMB}, {"max_cpu_secs", b.MaxCPUSecs}, {"max_run_time_secs", b.MaxRunTimeSecs},
		{"max_fs_write_mb", b.MaxFSWriteMB}, {"max_llm_tokens", b.MaxLLMTokens},
	} {
		if f.v < 0 {
			c.add("invalid_budget", "[budget]: %s must not be negative (0 means unlimited), got %d", f.key, f.v)
		}
	}
}

func (c *checker) checkPolicy() {
	p := c.wf.Policy
	if p == nil {
		return
	}
	// The rego family's spec checks the block's shape (checkFamilies);
	// this compiles the Rego itself, as the family does at start-up.
	c.issues = append(c.issues, regocompile.Check(c.wf, c.ctx)...)
	bad := func(format string, args ...any) { c.add("invalid_policy", format, args...) }
	lists := map[string][]string{}
	if p.FS != nil {
		lists["fs.read"], lists["fs.write"], lists["fs.delete"], lists["fs.list"] = p.FS.Read, p.FS.Write, p.FS.Delete, p.FS.List
	}
	if p.Env != nil {
		lists["env.read_keys"] = p.Env.ReadKeys
	}
	if p.HTTP != nil {
		lists["http.urls"] = p.HTTP.URLs
		for _, m := range p.HTTP.Methods {
			if !httpMethodRe.MatchString(m) {
				bad("[policy.http]: method %q must be an upper-case HTTP method", m)
			}
		}
	}
	if p.Shell != nil {
		lists["shell.commands"] = p.Shell.Commands
		for _, cmd := range p.Shell.Commands {
			if cmd != "*" && cmd != "" && !filepath.IsAbs(cmd) {
				bad("[policy.shell]: command %q must be an absolute path or \"*\"", cmd)
			}
		}
	}
	if p.MCP != nil {
		lists["mcp.servers"], lists["mcp.tools"], lists["mcp.resources"] = p.MCP.Servers, p.MCP.Tools, p.MCP.Resources
	}
	for _, k := range runtime.SortedKeys(lists) {
		for _, pat := range lists[k] {
			if strings.TrimSpace(pat) == "" {
				bad("[policy.%s]: empty pattern", k)
			}
		}
	}
}
