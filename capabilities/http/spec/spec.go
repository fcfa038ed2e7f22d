// Package spec declares the http family's route auth kinds: bearer, basic,
// hmac and mtls, with their [auth.<kind>.<binding>] tables (see
// docs/reference.md). It holds data and checks only, so the generator
// links it without the family.
package spec

import (
	"maps"
	"slices"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the http family's declaration.
var Family = spec.Family{
	ID: "http",
	Auths: []spec.Auth{
		{
			Name: "bearer",
			Doc:  "Authorization: Bearer <token>, compared in constant time against the binding's tokens.",
			Keys: []spec.Key{
				{Name: "tokens_env", Type: spec.String, Doc: "an environment variable holding the tokens, comma-separated"},
				{Name: "tokens_secret", Type: spec.String, Doc: "a [[secrets]] name holding them"},
				{Name: "tokens", Type: spec.Strings, Doc: "literal tokens (tests only)"},
			},
			Bindings: func(a *workflow.Auth) []string { return slices.Sorted(maps.Keys(a.Bearer)) },
			Check:    CheckBearer,
		},
		{
			Name: "basic",
			Doc:  "HTTP basic auth against the binding's user:password credentials.",
			Keys: []spec.Key{
				{Name: "credentials_env", Type: spec.String, Doc: "an environment variable holding user:password pairs, comma-separated"},
				{Name: "credentials_secret", Type: spec.String, Doc: "a [[secrets]] name holding them"},
				{Name: "credentials", Type: spec.Strings, Doc: "literal user:password pairs (tests only)"},
			},
			Bindings: func(a *workflow.Auth) []string { return slices.Sorted(maps.Keys(a.Basic)) },
			Check:    CheckBasic,
		},
		{
			Name: "hmac",
			Doc:  "An HMAC-SHA256 signature of the request body in a header, optionally with a signed timestamp against replay.",
			Keys: []spec.Key{
				{Name: "secret_env", Type: spec.String, Doc: "an environment variable holding the key"},
				{Name: "secret_name", Type: spec.String, Doc: "a [[secrets]] name holding it"},
				{Name: "secret", Type: spec.String, Doc: "a literal key (tests only)"},
				{Name: "header", Type: spec.String, Default: "X-Agent-Signature", Doc: "the signature header"},
				{Name: "prefix", Type: spec.String, Default: "sha256=", Doc: "the signature's prefix"},
				{Name: "timestamp_header", Type: spec.String, Doc: "a header holding a signed Unix timestamp"},
				{Name: "tolerance_secs", Type: spec.Int, Default: "300", Doc: "the accepted timestamp skew (needs timestamp_header)"},
			},
			Bindings: func(a *workflow.Auth) []string { return slices.Sorted(maps.Keys(a.HMAC)) },
			Check:    CheckHMAC,
		},
		{
			Name:  "mtls",
			Doc:   "The TLS client certificate, verified against [server.tls.client_auth] ca_file; takes no binding.",
			Route: CheckMTLS,
		},
	},
	Needs:    needs,
	NeedsDoc: "the environment variables bearer, basic and hmac bindings read (tokens_env, credentials_env, secret_env)",
}

// CheckBearer checks one [auth.bearer.<name>] binding.
func CheckBearer(a *workflow.Auth, name string, ctx spec.Context) []spec.Issue {
	b := a.Bearer[name]
	var is spec.Issues
	oneSource(&is, "tokens_env, tokens_secret or tokens", b.TokensEnv, b.TokensSecret, b.Tokens != nil)
	is.EnvKey("tokens_env", b.TokensEnv)
	is.SecretRef(ctx.Workflow(), "tokens_secret", b.TokensSecret)
	for _, tok := range b.Tokens {
		if tok == "" {
			is.Add("invalid_auth_binding", "tokens must not hold an empty token")
		}
	}
	return is
}

// CheckBasic checks one [auth.basic.<name>] binding.
func CheckBasic(a *workflow.Auth, name string, ctx spec.Context) []spec.Issue {
	b := a.Basic[name]
	var is spec.Issues
	oneSource(&is, "credentials_env, credentials_secret or credentials", b.CredentialsEnv, b.CredentialsSecret, b.Credentials != nil)
	is.EnvKey("credentials_env", b.CredentialsEnv)
	is.SecretRef(ctx.Workflow(), "credentials_secret", b.CredentialsSecret)
	for i, cred := range b.Credentials {
		if user, _, ok := strings.Cut(cred, ":"); !ok || user == "" {
			is.Add("invalid_auth_binding", "credentials[%d] must be user:password", i)
		}
	}
	return is
}

// CheckHMAC checks one [auth.hmac.<name>] binding.
func CheckHMAC(a *workflow.Auth, name string, ctx spec.Context) []spec.Issue {
	h := a.HMAC[name]
	var is spec.Issues
	oneSource(&is, "secret_env, secret_name or secret", h.SecretEnv, h.SecretName, h.Secret != "")
	is.EnvKey("secret_env", h.SecretEnv)
	is.SecretRef(ctx.Workflow(), "secret_name", h.SecretName)
	for _, hdr := range []struct{ key, val string }{{"header", h.Header}, {"timestamp_header", h.TimestampHeader}} {
		if hdr.val != "" && !rules.IsHeaderName(hdr.val) {
			is.Add("invalid_auth_binding", "%s %q is not a valid HTTP field name", hdr.key, hdr.val)
		}
	}
	if h.ToleranceSecs != nil {
		if h.TimestampHeader == "" {
			is.Add("invalid_auth_binding", "tolerance_secs needs timestamp_header")
		} else if *h.ToleranceSecs < 1 {
			is.Add("invalid_auth_binding", "tolerance_secs must be at least 1, got %d", *h.ToleranceSecs)
		}
	}
	return is
}

// oneSource: exactly one way to obtain a credential set.
func oneSource(is *spec.Issues, names string, env, secret string, literal bool) {
	n := 0
	for _, set := range []bool{env != "", secret != "", literal} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		is.Add("invalid_auth_binding", "one of %s is required", names)
	case n > 1:
		is.Add("invalid_auth_binding", "set only one of %s", names)
	}
}

// CheckMTLS checks what a route using mtls needs: a server that asks for
// a client certificate.
func CheckMTLS(wf *workflow.Workflow) []spec.Issue {
	var is spec.Issues
	if wf.Server == nil || wf.Server.TLS == nil || wf.Server.TLS.ClientAuth == nil || wf.Server.TLS.ClientAuth.Mode != "required" {
		is.Add("mtls_requires_client_auth", `auth = "mtls" requires [server.tls.client_auth] mode = "required"`)
	}
	return is
}

// needs: the variables the bindings read their credentials from.
func needs(wf *workflow.Workflow) []spec.Need {
	a := wf.Auth
	if a == nil {
		return nil
	}
	var out []spec.Need
	add := func(key, label string) {
		if key != "" {
			out = append(out, spec.Need{Kind: spec.NeedSecret, Key: key, Label: label})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.Bearer)) {
		add(a.Bearer[name].TokensEnv, "bearer tokens for auth binding "+name)
	}
	for _, name := range slices.Sorted(maps.Keys(a.Basic)) {
		add(a.Basic[name].CredentialsEnv, "basic credentials for auth binding "+name)
	}
	for _, name := range slices.Sorted(maps.Keys(a.HMAC)) {
		add(a.HMAC[name].SecretEnv, "HMAC secret for auth binding "+name)
	}
	return out
}

// Paths the serve-mode runtime answers itself, before any route.
const (
	HealthPath        = "/healthz"
	ReadyPath         = "/readyz"
	MetricsPath       = "/metrics"
	KilnDiscoveryPath = "/.well-known/kiln"
	OpenWOPPath       = "/.well-known/openwop"
	AgentsPath        = "/v1/agents" // and every agent under AgentsPath + "/"
	RunsPath          = "/v1/runs"   // async runs' status, under RunsPath + "/"
)

// IsReservedPath reports whether the runtime answers path itself, so no
// [[http_routes]] entry may declare it: the one list both the generator
// and the server use.
func IsReservedPath(path string) bool {
	if slices.Contains(reservedExact, path) {
		return true
	}
	return slices.ContainsFunc(reservedPrefixes, func(p string) bool { return strings.HasPrefix(path, p+"/") })
}

// The paths the runtime answers: exact paths, and the prefixes whose
// whole subtree it answers.
var (
	reservedExact    = []string{HealthPath, ReadyPath, MetricsPath, KilnDiscoveryPath, OpenWOPPath, AgentsPath, RunsPath}
	reservedPrefixes = []string{AgentsPath, RunsPath}
)
