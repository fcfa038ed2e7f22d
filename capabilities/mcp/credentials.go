package mcp

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	mcpspec "github.com/kilnworks/kiln/capabilities/mcp/spec"
	"github.com/kilnworks/kiln/runtime"
)

// credentials wraps base so that a url server's declared headers go on
// each of its requests. Secrets are resolved per request, so a rotated
// file secret is picked up without a restart, and never from the run
// context.
func (p *Pool) credentials(s Server, base http.RoundTripper) http.RoundTripper {
	if len(s.Headers) == 0 {
		return base
	}
	origin, _ := url.Parse(s.URL) // validated before the pool is built
	return &credentialTransport{base: base, server: s.Name, origin: origin, headers: s.Headers, secret: p.secret}
}

type credentialTransport struct {
	base    http.RoundTripper
	server  string
	origin  *url.URL
	headers map[string]string
	secret  func(name string) (string, error)
}

// RoundTrip adds the headers only on the server's own origin: a redirect
// to another host or scheme is sent without them, so a credential never
// leaves for a place the workflow did not name.
func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameOrigin(req.URL, t.origin) {
		return t.base.RoundTrip(req)
	}
	out := req.Clone(req.Context()) // a RoundTripper must not change its request
	for _, name := range runtime.SortedKeys(t.headers) {
		v, err := t.resolve(name)
		if err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		out.Header.Set(name, v)
	}
	return t.base.RoundTrip(out)
}

// resolve fills one header's placeholders. Errors name the server, the
// header and the secret, never a value.
func (t *credentialTransport) resolve(name string) (string, error) {
	parts, secret := mcpspec.HeaderParts(t.headers[name])
	var b strings.Builder
	for i, part := range parts {
		if !secret[i] {
			b.WriteString(part)
			continue
		}
		v, err := t.secret(part)
		if err != nil {
			return "", fmt.Errorf("[[mcp_servers]] %q: header %s: secret %s: %s", t.server, name, part, runtime.Redact(err.Error()))
		}
		runtime.RedactValue(v)
		if strings.ContainsAny(v, "\r\n\x00") {
			return "", fmt.Errorf("[[mcp_servers]] %q: header %s: secret %s contains CR, LF or NUL; refused", t.server, name, part)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// sameOrigin compares scheme and host:port, the default port included.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}
