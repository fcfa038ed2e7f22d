// Package spec declares the httpclient family's node kind, http_request
// (see docs/reference.md). It holds data and checks only, so the generator
// links it without the family.
package spec

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the httpclient family's declaration.
var Family = spec.Family{
	ID: "httpclient",
	Kinds: []spec.Kind{{
		Name: "http_request",
		Doc: "Sends one HTTP/1.1 request after the policy's method and URL check. Redirects are never followed (a 3xx takes the error branch); " +
			"loopback, private and link-local addresses are refused after DNS unless the [policy.http] pattern that allowed the URL names the host. " +
			"Header values are literals plus {{secret:NAME}} placeholders, resolved at request time and redacted from the output.",
		Keys: []spec.Key{
			{Name: "method", Type: spec.String, Required: true, Doc: "an upper-case HTTP method such as GET or POST"},
			{Name: "url_from", Type: spec.Path, Required: true, Doc: "the URL (a string)"},
			{Name: "body_from", Type: spec.Path, Doc: "the body: a string as it is, any other value as JSON"},
			{Name: "headers", Type: spec.Table, Doc: "request headers: literals and {{secret:NAME}} of declared [[secrets]]"},
		},
		Limits:   []string{"request and response bodies at most 1 MiB", "30 s per request within the run deadline"},
		Check:    CheckHTTPRequest,
		Output:   "{status, headers, body, bytes}; dry-run: {method, url, dry_run: true}",
		Branches: []string{"error"},
		Policy:   "http.request",
	}},
	Needs:         needs,
	NeedsIfLinked: true,
	NeedsDoc:      "a network need for the literal host of each [policy.http] URL pattern",
}

var (
	methodRe = regexp.MustCompile(`^[A-Z]+$`)
	// secretRefRe is the only placeholder a header value may hold.
	secretRefRe = regexp.MustCompile(`^secret:([A-Za-z_][A-Za-z0-9_.-]*)$`)
)

// CheckHTTPRequest checks an http_request node: CheckRequest, an
// upper-case method and the declared-header contract.
func CheckHTTPRequest(n *workflow.Node, ctx spec.Context) []spec.Issue {
	is := spec.Issues(CheckRequest(n, ctx))
	if n.Method != "" && !methodRe.MatchString(n.Method) {
		is.Add("invalid_http_method", "method %q must be an upper-case HTTP method such as GET or POST", n.Method)
	}
	return append(is, checkHeaders(n.Headers, ctx)...)
}

// CheckRequest checks an http_request node's required keys: what the
// family's Prepare checks too (it accepts a lower-case method and secrets
// from the environment, which the workflow dialect does not).
func CheckRequest(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("method", n.Method != "")
	is.Require("url_from", n.URLFrom != "")
	return is
}

// checkHeaders enforces the declared-header contract: RFC 9110 names, no
// CR, LF or NUL, and no placeholder other than {{secret:NAME}} of a
// declared secret (values are never interpolated from the run context).
func checkHeaders(headers map[string]string, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		val := headers[name]
		if !rules.IsHeaderName(name) {
			is.Add("invalid_header", "header name %q is not a valid HTTP field name", name)
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			is.Add("invalid_header", "header %s: value contains CR, LF or NUL", name)
		}
		rest := val
		for {
			open := strings.Index(rest, "{{")
			if open < 0 {
				if strings.Contains(rest, "}}") {
					is.Add("invalid_header_placeholder", "header %s: unmatched }}", name)
				}
				break
			}
			end := strings.Index(rest[open+2:], "}}")
			if end < 0 {
				is.Add("invalid_header_placeholder", "header %s: unclosed {{", name)
				break
			}
			inner := strings.TrimSpace(rest[open+2 : open+2+end])
			m := secretRefRe.FindStringSubmatch(inner)
			switch {
			case m == nil:
				is.Add("invalid_header_placeholder", "header %s: placeholder {{%s}} is not allowed; header values take literals and {{secret:NAME}} only", name, inner)
			case !spec.Secret(ctx.Workflow(), m[1]):
				is.Add("unknown_secret", "header %s: secret %q is not declared in [[secrets]]", name, m[1])
			}
			rest = rest[open+2+end+2:]
		}
	}
	return is
}

// needs: the hosts the policy lets http_request reach.
func needs(wf *workflow.Workflow) []spec.Need {
	if wf.Policy == nil || wf.Policy.HTTP == nil {
		return nil
	}
	var out []spec.Need
	for _, pat := range wf.Policy.HTTP.URLs {
		if h := rules.PatternHost(pat); h != "" {
			out = append(out, spec.Need{Kind: spec.NeedNetwork, Host: h})
		}
	}
	return out
}
