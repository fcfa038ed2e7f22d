// Package spec declares the oidc family's route auth kind, oidc, and its
// [auth.oidc.<binding>] tables (see docs/reference.md). It holds data and
// checks only, so the generator links it without the family.
package spec

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Algorithms are the JWS algorithms the family verifies, so the ones a
// binding may accept.
var Algorithms = []string{"RS256", "RS384", "RS512", "ES256", "ES384"}

// MaxClockSkewSecs bounds clock_skew_secs.
const MaxClockSkewSecs = 600

// Family is the oidc family's declaration.
var Family = spec.Family{
	ID: "oidc",
	Auths: []spec.Auth{{
		Name: "oidc",
		Doc:  "An OIDC bearer token (a JWT) verified against a JWKS pinned in the workflow: signature, issuer, audience, expiry and, optionally, the subject.",
		Keys: []spec.Key{
			{Name: "issuer", Type: spec.String, Required: true, Doc: "the expected iss, an http(s) URL"},
			{Name: "audience", Type: spec.String, Required: true, Doc: "the expected aud"},
			{Name: "jwks_file", Type: spec.String, Doc: "a JSON Web Key Set file, read at load time (this or jwks_json)"},
			{Name: "jwks_json", Type: spec.String, Doc: "the JSON Web Key Set inline"},
			{Name: "subject_allowlist", Type: spec.Strings, Doc: "the subjects accepted (absent: any)"},
			{Name: "clock_skew_secs", Type: spec.Int, Default: "60", Doc: "the accepted clock skew, 0..600"},
			{Name: "algorithms", Type: spec.Strings, Default: `["RS256"]`, Doc: "the accepted algorithms"},
		},
		Limits:    []string{"algorithms: RS256, RS384, RS512, ES256, ES384", "clock_skew_secs 0..600", "nothing is fetched: keys are pinned"},
		Bindings:  func(a *workflow.Auth) []string { return slices.Sorted(maps.Keys(a.OIDC)) },
		NamedOnly: true,
		Check:     CheckBinding,
	}},
}

// CheckBinding checks one [auth.oidc.<name>] binding.
func CheckBinding(a *workflow.Auth, name string, ctx spec.Context) []spec.Issue {
	o := a.OIDC[name]
	var is spec.Issues
	if o.Issuer == "" {
		is.Add("missing_field", "issuer is required")
	} else if !rules.HTTPURL(o.Issuer) {
		is.Add("invalid_auth_binding", "issuer %q must be an http(s) URL", o.Issuer)
	}
	is.Require("audience", o.Audience != "")
	switch {
	case o.JWKSFile == "" && o.JWKSJSON == "":
		is.Add("missing_field", "jwks_file or jwks_json is required")
	case o.JWKSFile != "" && o.JWKSJSON != "":
		is.Add("field_conflict", "set jwks_file or jwks_json, not both")
	case o.JWKSJSON != "":
		checkJWKS(&is, "jwks_json", []byte(o.JWKSJSON))
	default:
		data, file := ctx.File("jwks_file", o.JWKSFile)
		is = append(is, file...)
		if file == nil {
			checkJWKS(&is, "jwks_file "+o.JWKSFile, data)
		}
	}
	for _, alg := range o.Algorithms {
		if !slices.Contains(Algorithms, alg) {
			is.Add("invalid_auth_binding", "algorithm %q is not supported (%s)", alg, strings.Join(Algorithms, ", "))
		}
	}
	if o.ClockSkewSecs != nil && (*o.ClockSkewSecs < 0 || *o.ClockSkewSecs > MaxClockSkewSecs) {
		is.Add("invalid_auth_binding", "clock_skew_secs must be within 0..%d, got %d", MaxClockSkewSecs, *o.ClockSkewSecs)
	}
	for _, s := range o.SubjectAllowlist {
		if s == "" {
			is.Add("invalid_auth_binding", "subject_allowlist must not hold an empty subject")
		}
	}
	return is
}

func checkJWKS(is *spec.Issues, what string, data []byte) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) == 0 {
		is.Add("invalid_auth_binding", "%s must be a JSON Web Key Set with a non-empty \"keys\" array", what)
	}
}
