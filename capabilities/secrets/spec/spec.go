// Package spec declares the secrets family's [[secrets]] table and its
// sources: env, file, command and oauth2 (see docs/reference.md). It holds
// data and checks only, so the generator links it without the family.
package spec

import (
	"regexp"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Source is one way a [[secrets]] entry obtains its value.
type Source struct {
	Name string
	Doc  string
	Keys []spec.Key
}

// Sources are the [[secrets]] sources; name and source apply to all.
var Sources = []Source{
	{Name: "env", Doc: "an environment variable", Keys: []spec.Key{
		{Name: "var", Type: spec.String, Required: true, Doc: "the variable name"}}},
	{Name: "file", Doc: "a file (a mounted secret), read at start-up", Keys: []spec.Key{
		{Name: "path", Type: spec.String, Required: true, Doc: "the file"},
		{Name: "trim", Type: spec.Bool, Default: "true", Doc: "drop one trailing newline"}}},
	{Name: "command", Doc: "the standard output of a program run without a shell", Keys: []spec.Key{
		{Name: "argv", Type: spec.Strings, Required: true, Doc: "the program (a clean absolute path) and its arguments"}}},
	{Name: "oauth2", Doc: "an OAuth2 client-credentials access token, refreshed before it expires", Keys: []spec.Key{
		{Name: "token_url", Type: spec.String, Required: true, Doc: "the token endpoint, https (http only to loopback)"},
		{Name: "client_id_env", Type: spec.String, Required: true, Doc: "the variable holding the client id"},
		{Name: "client_secret_env", Type: spec.String, Required: true, Doc: "the variable holding the client secret"},
		{Name: "scopes", Type: spec.Strings, Doc: "requested scopes"},
		{Name: "extra_params", Type: spec.Table, Doc: "extra token request parameters"},
		{Name: "auth_style", Type: spec.String, Default: "body", Doc: "body or basic: where the client credentials go"},
		{Name: "skew_secs", Type: spec.Int, Doc: "refresh this long before expiry"}}},
}

// Family is the secrets family's declaration.
var Family = spec.Family{
	ID:       "secrets",
	Check:    CheckSecrets,
	Needs:    needs,
	NeedsDoc: "each env source's variable; each file source's path (ro); each oauth2 source's client id and secret variables and token host",
}

var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// CheckSecrets checks [[secrets]]: names, then each entry (CheckSecret).
func CheckSecrets(wf *workflow.Workflow, _ spec.Context) []spec.Issue {
	var is spec.Issues
	seen := map[string]bool{}
	for i := range wf.Secrets {
		s := &wf.Secrets[i]
		where := is.Entry("secrets", "secret", i, s.Name, seen, "duplicate_secret")
		if s.Name != "" && !nameRe.MatchString(s.Name) {
			is.Add("invalid_secret", "%s: name must be letters, digits, _, . or - (starting with a letter or _)", where)
		}
		for _, e := range CheckSecret(s) {
			is.Add(e.Code, "%s: %s", where, e.Message)
		}
	}
	return is
}

// CheckSecret checks one entry's source and the keys that source takes;
// messages are relative to the entry.
func CheckSecret(s *workflow.Secret) []spec.Issue {
	var is spec.Issues
	var src *Source
	for i := range Sources {
		if Sources[i].Name == s.Source {
			src = &Sources[i]
		}
	}
	if src == nil {
		if s.Source == "" {
			is.Add("missing_field", "source is required (env, file, command or oauth2)")
		} else {
			is.Add("invalid_secret_source", "source %q must be env, file, command or oauth2", s.Source)
		}
		return is
	}
	is = append(is, spec.NotAllowed(s, src.Keys, "name", "source")...)
	set := map[string]bool{}
	for _, k := range spec.SetKeys(s) {
		set[k] = true
	}
	for _, k := range src.Keys {
		if k.Required {
			is.Require(k.Name, set[k.Name])
		}
	}
	switch s.Source {
	case "env":
		is.EnvKey("var", s.Var)
	case "command":
		if s.Argv != nil && len(s.Argv) == 0 {
			is.Add("invalid_secret", "argv must name a program")
		}
		if len(s.Argv) > 0 && !spec.CleanAbs(s.Argv[0]) {
			is.Add("invalid_secret", "argv[0] %q must be a clean absolute path (no PATH lookup, no shell)", s.Argv[0])
		}
	case "oauth2":
		if s.TokenURL != "" && !rules.HTTPURL(s.TokenURL) {
			is.Add("invalid_url", "token_url %q must be an http(s) URL", s.TokenURL)
		}
		is.EnvKey("client_id_env", s.ClientIDEnv)
		is.EnvKey("client_secret_env", s.ClientSecretEnv)
		if s.AuthStyle != "" && s.AuthStyle != "body" && s.AuthStyle != "basic" {
			is.Add("invalid_secret", "auth_style %q must be body or basic", s.AuthStyle)
		}
		if s.SkewSecs != nil && *s.SkewSecs < 0 {
			is.Add("out_of_range", "skew_secs must not be negative, got %d", *s.SkewSecs)
		}
	}
	return is
}

// needs: the variables and files the sources read, and the token hosts;
// a secret file and a token endpoint are reached by the registry itself,
// outside the workflow's [policy].
func needs(wf *workflow.Workflow) []spec.Need {
	var out []spec.Need
	secret := func(key, label string) {
		if key != "" {
			out = append(out, spec.Need{Kind: spec.NeedSecret, Key: key, Label: label})
		}
	}
	for _, s := range wf.Secrets {
		switch s.Source {
		case "env":
			out = append(out, spec.Need{Kind: spec.NeedSecret, Key: s.Var, Label: "secret " + s.Name})
		case "file":
			out = append(out, spec.Need{Kind: spec.NeedFilesystem, Path: s.Path, Mode: "ro", Label: "secret file for " + s.Name, Ungoverned: true})
		case "oauth2":
			secret(s.ClientIDEnv, "OAuth2 client id for "+s.Name)
			secret(s.ClientSecretEnv, "OAuth2 client secret for "+s.Name)
			if h := rules.Hostname(s.TokenURL); h != "" {
				out = append(out, spec.Need{Kind: spec.NeedNetwork, Host: h, Ungoverned: true})
			}
		}
	}
	return out
}
