package gen

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var (
	routeMethods   = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true, "OPTIONS": true}
	reservedRoutes = map[string]bool{"/healthz": true, "/metrics": true, "/.well-known/kiln": true, "/v1/agents": true}
	capabilityRe   = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)*$`)
	bindingNameRe  = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	oidcAlgorithms = map[string]bool{
		"RS256": true, "RS384": true, "RS512": true, "PS256": true, "PS384": true, "PS512": true,
		"ES256": true, "ES384": true, "ES512": true, "EdDSA": true,
	}
	backendProviders = map[string]bool{"anthropic": true, "openai": true, "gemini": true, "openai-compatible": true}
	fsEvents         = map[string]bool{"create": true, "modify": true, "remove": true, "rename": true}
)

var triggerSpecs = map[string]kindSpec{
	"cron":                 {required: []string{"schedule", "start_node"}},
	"interval":             {required: []string{"every", "start_node"}},
	"fs_watch":             {required: []string{"path", "start_node"}, optional: []string{"recursive", "events", "debounce_ms"}},
	"mcp.resource.updated": {required: []string{"server", "resource", "start_node"}},
	"mcp.resource.created": {required: []string{"server", "resource", "start_node"}},
	"internal.event":       {required: []string{"name", "start_node"}},
}

var secretSpecs = map[string]kindSpec{
	"env":     {required: []string{"var"}},
	"file":    {required: []string{"path"}, optional: []string{"trim"}},
	"command": {required: []string{"argv"}},
	"oauth2": {required: []string{"token_url", "client_id_env", "client_secret_env"},
		optional: []string{"scopes", "extra_params", "auth_style", "skew_secs"}},
}

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
		case reservedRoutes[r.Path]:
			c.add("invalid_route", "%s: path %q is served by the runtime itself", where, r.Path)
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
		if k := r.IdempotencyKey; k != "" && k != "body_sha256" && !validContextPath(k) {
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
			if data, ok := c.asset(where, "input_schema", "schema", r.InputSchema); ok {
				c.checkSchema(where, "input_schema", r.InputSchema, data)
			}
		}
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

// checkAuthRef checks a route's auth reference: none | bearer[:n] |
// basic[:n] | hmac[:n] | oidc:n | mtls. A bare kind means binding "default".
func (c *checker) checkAuthRef(where, ref string) {
	if ref == "" || ref == "none" {
		return
	}
	if ref == "mtls" {
		tls := c.serverTLS()
		if tls == nil || tls.ClientAuth == nil || tls.ClientAuth.Mode != "required" {
			c.add("mtls_requires_client_auth", "%s: auth = \"mtls\" requires [server.tls.client_auth] mode = \"required\"", where)
		}
		return
	}
	kind, name, hasName := strings.Cut(ref, ":")
	if !hasName {
		name = "default"
	}
	if name == "" || !bindingNameRe.MatchString(name) || (kind == "oidc" && !hasName) {
		c.add("invalid_auth_ref", "%s: auth %q must be none, bearer[:name], basic[:name], hmac[:name], oidc:name or mtls", where, ref)
		return
	}
	a := c.wf.Auth
	if a == nil {
		a = &workflow.Auth{}
	}
	var exists bool
	switch kind {
	case "bearer":
		_, exists = a.Bearer[name]
	case "basic":
		_, exists = a.Basic[name]
	case "hmac":
		_, exists = a.HMAC[name]
	case "oidc":
		_, exists = a.OIDC[name]
	default:
		c.add("invalid_auth_ref", "%s: auth %q must be none, bearer[:name], basic[:name], hmac[:name], oidc:name or mtls", where, ref)
		return
	}
	if !exists {
		c.add("unknown_auth_binding", "%s: auth %q needs an [auth.%s.%s] binding", where, ref, kind, name)
	}
}

func (c *checker) serverTLS() *workflow.TLS {
	if c.wf.Server == nil {
		return nil
	}
	return c.wf.Server.TLS
}

func (c *checker) checkTriggers() {
	for i := range c.wf.Triggers {
		t := &c.wf.Triggers[i]
		where := fmt.Sprintf("triggers[%d] (%s)", i, t.Type)
		spec, ok := triggerSpecs[t.Type]
		if !ok {
			if t.Type == "" {
				c.add("missing_field", "%s: type is required", where)
			} else {
				c.add("unknown_trigger_type", "%s: unknown trigger type %q (known: cron, interval, fs_watch, mcp.resource.updated, mcp.resource.created, internal.event)", where, t.Type)
			}
			continue
		}
		c.checkFields(where, t, spec.required, spec.optional, []string{"type"})
		if t.StartNode != "" && c.starts[t.StartNode] == nil {
			c.add("unknown_start_node", "%s: start_node %q is not declared in [[start_nodes]]", where, t.StartNode)
		}
		switch t.Type {
		case "cron":
			if t.Schedule != "" {
				if err := parseCron(t.Schedule); err != nil {
					c.add("invalid_cron", "%s: schedule %q: %v", where, t.Schedule, err)
				}
			}
		case "interval":
			if t.Every != "" {
				if _, err := parseInterval(t.Every); err != nil {
					c.add("invalid_interval", "%s: every %q: %v", where, t.Every, err)
				}
			}
		case "fs_watch":
			seen := map[string]bool{}
			for _, ev := range t.Events {
				switch {
				case !fsEvents[ev]:
					c.add("invalid_fs_events", "%s: event %q must be one of create, modify, remove, rename", where, ev)
				case seen[ev]:
					c.add("invalid_fs_events", "%s: event %q is listed twice", where, ev)
				}
				seen[ev] = true
			}
			if t.DebounceMS != nil && *t.DebounceMS < 0 {
				c.add("out_of_range", "%s: debounce_ms must not be negative, got %d", where, *t.DebounceMS)
			}
		case "mcp.resource.updated", "mcp.resource.created":
			if t.Server != "" && !c.servers[t.Server] {
				c.add("unknown_mcp_server", "%s: server %q is not declared in [[mcp_servers]]", where, t.Server)
			}
		}
	}
}

func (c *checker) checkAuth() {
	a := c.wf.Auth
	if a == nil {
		return
	}
	bad := func(where, format string, args ...any) {
		c.add("invalid_auth_binding", where+": "+format, args...)
	}
	checkName := func(where, name string) {
		if !bindingNameRe.MatchString(name) {
			bad(where, "binding name must be letters, digits, _ or -")
		}
	}
	for _, name := range runtime.SortedKeys(a.Bearer) {
		b, where := a.Bearer[name], fmt.Sprintf("[auth.bearer.%s]", name)
		checkName(where, name)
		c.checkOneSource(where, "tokens_env, tokens_secret or tokens", b.TokensEnv, b.TokensSecret, b.Tokens != nil)
		c.checkEnvName(where, "tokens_env", b.TokensEnv)
		c.checkSecretRef(where, "tokens_secret", b.TokensSecret)
		for _, tok := range b.Tokens {
			if tok == "" {
				bad(where, "tokens must not hold an empty token")
			}
		}
	}
	for _, name := range runtime.SortedKeys(a.Basic) {
		b, where := a.Basic[name], fmt.Sprintf("[auth.basic.%s]", name)
		checkName(where, name)
		c.checkOneSource(where, "credentials_env, credentials_secret or credentials", b.CredentialsEnv, b.CredentialsSecret, b.Credentials != nil)
		c.checkEnvName(where, "credentials_env", b.CredentialsEnv)
		c.checkSecretRef(where, "credentials_secret", b.CredentialsSecret)
		for i, cred := range b.Credentials {
			if user, _, ok := strings.Cut(cred, ":"); !ok || user == "" {
				bad(where, "credentials[%d] must be user:password", i)
			}
		}
	}
	for _, name := range runtime.SortedKeys(a.HMAC) {
		h, where := a.HMAC[name], fmt.Sprintf("[auth.hmac.%s]", name)
		checkName(where, name)
		c.checkOneSource(where, "secret_env, secret_name or secret", h.SecretEnv, h.SecretName, h.Secret != "")
		c.checkEnvName(where, "secret_env", h.SecretEnv)
		c.checkSecretRef(where, "secret_name", h.SecretName)
		for _, hdr := range []struct{ key, val string }{{"header", h.Header}, {"timestamp_header", h.TimestampHeader}} {
			if hdr.val != "" && !headerNameRe.MatchString(hdr.val) {
				bad(where, "%s %q is not a valid HTTP field name", hdr.key, hdr.val)
			}
		}
		if h.ToleranceSecs != nil {
			if h.TimestampHeader == "" {
				bad(where, "tolerance_secs needs timestamp_header")
			} else if *h.ToleranceSecs < 1 {
				bad(where, "tolerance_secs must be at least 1, got %d", *h.ToleranceSecs)
			}
		}
	}
	for _, name := range runtime.SortedKeys(a.OIDC) {
		o, where := a.OIDC[name], fmt.Sprintf("[auth.oidc.%s]", name)
		checkName(where, name)
		if o.Issuer == "" {
			c.add("missing_field", "%s: issuer is required", where)
		} else if !isHTTPURL(o.Issuer) {
			bad(where, "issuer %q must be an http(s) URL", o.Issuer)
		}
		if o.Audience == "" {
			c.add("missing_field", "%s: audience is required", where)
		}
		switch {
		case o.JWKSFile == "" && o.JWKSJSON == "":
			c.add("missing_field", "%s: jwks_file or jwks_json is required", where)
		case o.JWKSFile != "" && o.JWKSJSON != "":
			c.add("field_conflict", "%s: set jwks_file or jwks_json, not both", where)
		case o.JWKSJSON != "":
			c.checkJWKS(where, "jwks_json", []byte(o.JWKSJSON))
		default:
			if data, ok := c.asset(where, "jwks_file", "file", o.JWKSFile); ok {
				c.checkJWKS(where, "jwks_file "+o.JWKSFile, data)
			}
		}
		for _, alg := range o.Algorithms {
			if !oidcAlgorithms[alg] {
				bad(where, "algorithm %q is not supported (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA)", alg)
			}
		}
		if o.ClockSkewSecs != nil && *o.ClockSkewSecs < 0 {
			bad(where, "clock_skew_secs must not be negative, got %d", *o.ClockSkewSecs)
		}
		for _, s := range o.SubjectAllowlist {
			if s == "" {
				bad(where, "subject_allowlist must not hold an empty subject")
			}
		}
	}
}

// checkOneSource: exactly one way to obtain a credential set.
func (c *checker) checkOneSource(where, names string, env, secret string, literal bool) {
	n := 0
	for _, set := range []bool{env != "", secret != "", literal} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		c.add("invalid_auth_binding", "%s: one of %s is required", where, names)
	case n > 1:
		c.add("invalid_auth_binding", "%s: set only one of %s", where, names)
	}
}

func (c *checker) checkEnvName(where, key, name string) {
	if name != "" && !envKeyRe.MatchString(name) {
		c.add("invalid_env_key", "%s: %s %q is not an environment variable name", where, key, name)
	}
}

func (c *checker) checkSecretRef(where, key, name string) {
	if name != "" && !c.secrets[name] {
		c.add("unknown_secret", "%s: %s %q is not declared in [[secrets]]", where, key, name)
	}
}

func (c *checker) checkJWKS(where, what string, data []byte) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) == 0 {
		c.add("invalid_auth_binding", "%s: %s must be a JSON Web Key Set with a non-empty \"keys\" array", where, what)
	}
}

func (c *checker) checkServer() {
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
		if o.Endpoint != "" && !isHTTPURL(o.Endpoint) {
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

func (c *checker) checkMCPServers() {
	seen := map[string]bool{}
	for i, s := range c.wf.MCPServers {
		where := fmt.Sprintf("mcp server %q", s.Name)
		if s.Name == "" {
			where = fmt.Sprintf("mcp_servers[%d]", i)
			c.add("missing_field", "%s: name is required", where)
		} else if seen[s.Name] {
			c.add("duplicate_mcp_server", "%s: declared more than once", where)
		}
		seen[s.Name] = true
		switch {
		case len(s.Command) == 0 && s.URL == "":
			c.add("invalid_mcp_server", "%s: command (stdio) or url (streamable HTTP) is required", where)
		case len(s.Command) > 0 && s.URL != "":
			c.add("invalid_mcp_server", "%s: set command or url, not both", where)
		case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
			c.add("invalid_mcp_server", "%s: command[0] must name a program", where)
		case s.URL != "" && !isHTTPURL(s.URL):
			c.add("invalid_mcp_server", "%s: url %q must be an http(s) URL", where, s.URL)
		}
		for _, v := range runtime.SortedKeys(s.Env) {
			c.checkEnvName(where, "env", v)
			c.checkSecretRef(where, "env."+v, s.Env[v])
		}
	}
}

func (c *checker) checkBackends() {
	if c.wf.Intelligence == nil {
		return
	}
	seen := map[string]bool{}
	for i, b := range c.wf.Intelligence.Backends {
		where := fmt.Sprintf("backend %q", b.Name)
		if b.Name == "" {
			where = fmt.Sprintf("intelligence.backends[%d]", i)
			c.add("missing_field", "%s: name is required", where)
		} else if seen[b.Name] {
			c.add("duplicate_backend", "%s: declared more than once", where)
		}
		seen[b.Name] = true
		switch {
		case b.Provider == "":
			c.add("missing_field", "%s: provider is required", where)
		case !backendProviders[b.Provider]:
			c.add("invalid_backend_provider", "%s: provider %q must be anthropic, openai, gemini or openai-compatible", where, b.Provider)
		}
		if b.Model == "" {
			c.add("missing_field", "%s: model is required", where)
		}
		if b.Provider == "openai-compatible" && b.BaseURL == "" {
			c.add("missing_field", "%s: base_url is required for provider openai-compatible", where)
		}
		if b.BaseURL != "" && !isHTTPURL(b.BaseURL) {
			c.add("invalid_url", "%s: base_url %q must be an http(s) URL", where, b.BaseURL)
		}
		c.checkEnvName(where, "api_key_env", b.APIKeyEnv)
		if b.MaxTokens < 0 {
			c.add("out_of_range", "%s: max_tokens must not be negative, got %d", where, b.MaxTokens)
		}
	}
}

func (c *checker) checkSecrets() {
	seen := map[string]bool{}
	for i := range c.wf.Secrets {
		s := &c.wf.Secrets[i]
		where := fmt.Sprintf("secret %q", s.Name)
		switch {
		case s.Name == "":
			where = fmt.Sprintf("secrets[%d]", i)
			c.add("missing_field", "%s: name is required", where)
		case !secretNameRe.MatchString(s.Name):
			c.add("invalid_secret", "%s: name must be letters, digits, _, . or - (starting with a letter or _)", where)
		case seen[s.Name]:
			c.add("duplicate_secret", "%s: declared more than once", where)
		}
		seen[s.Name] = true
		spec, ok := secretSpecs[s.Source]
		if !ok {
			if s.Source == "" {
				c.add("missing_field", "%s: source is required (env, file, command or oauth2)", where)
			} else {
				c.add("invalid_secret_source", "%s: source %q must be env, file, command or oauth2", where, s.Source)
			}
			continue
		}
		c.checkFields(where, s, spec.required, spec.optional, []string{"name", "source"})
		switch s.Source {
		case "env":
			c.checkEnvName(where, "var", s.Var)
		case "command":
			if len(s.Argv) > 0 && (!filepath.IsAbs(s.Argv[0]) || filepath.Clean(s.Argv[0]) != s.Argv[0]) {
				c.add("invalid_secret", "%s: argv[0] %q must be a clean absolute path (no PATH lookup, no shell)", where, s.Argv[0])
			}
		case "oauth2":
			if s.TokenURL != "" && !isHTTPURL(s.TokenURL) {
				c.add("invalid_url", "%s: token_url %q must be an http(s) URL", where, s.TokenURL)
			}
			c.checkEnvName(where, "client_id_env", s.ClientIDEnv)
			c.checkEnvName(where, "client_secret_env", s.ClientSecretEnv)
			if s.AuthStyle != "" && s.AuthStyle != "body" && s.AuthStyle != "basic" {
				c.add("invalid_secret", "%s: auth_style %q must be body or basic", where, s.AuthStyle)
			}
			if s.SkewSecs != nil && *s.SkewSecs < 0 {
				c.add("out_of_range", "%s: skew_secs must not be negative, got %d", where, *s.SkewSecs)
			}
		}
	}
}

func (c *checker) checkPolicy() {
	p := c.wf.Policy
	if p == nil {
		return
	}
	if p.Rego != nil {
		c.add("rego_unsupported", "[policy.rego]: kiln has no Rego evaluator; express the rule in the static allowlists")
	}
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

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
