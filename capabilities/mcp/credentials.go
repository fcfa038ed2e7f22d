package mcp

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime"
)

// credentials wraps base so that a url server's declared headers go on
// each of its requests. Secrets are resolved per request, so a rotated
// file secret is picked up without a restart, and never from the run
// context.
func (p *Pool) credentials(s Server, base http.RoundTripper) http.RoundTripper {
	if len(s.Headers) == 0 && s.OAuth2 == "" {
		return base
	}
	origin, _ := url.Parse(s.URL) // validated before the pool is built
	t := &credentialTransport{base: base, server: s.Name, origin: origin, headers: s.Headers,
		oauth2: s.OAuth2, secret: p.secret, refused: p.refused}
	if s.OAuth2 != "" && p.opts.Retarget != nil {
		t.discovery = &discoverer{server: s.Name, origin: origin, hosts: s.AuthHosts, policy: p.opts.Policy,
			retarget: func(tokenURL string) error { return p.opts.Retarget(s.OAuth2, tokenURL) }}
	}
	return t
}

type credentialTransport struct {
	base    http.RoundTripper
	server  string
	origin  *url.URL
	headers map[string]string
	oauth2  string // the [[secrets]] oauth2 entry whose token is the bearer
	secret  func(name string) (string, error)
	refused func(name, value string)

	// discovery runs at most once per connection, on the first 401 that
	// points at protected resource metadata.
	discovery  *discoverer
	discovered sync.Once
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
			closeBody(req)
			return nil, err
		}
		out.Header.Set(name, v)
	}
	if t.oauth2 == "" {
		return t.base.RoundTrip(out)
	}
	token, err := t.token()
	if err != nil {
		closeBody(req)
		return nil, err
	}
	out.Header.Set("Authorization", "Bearer "+token)
	resp, err := t.base.RoundTrip(out)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	// A 401 to a token kiln holds as valid: it was revoked or the server's
	// clock runs ahead. Fetch a new one and send the request once more;
	// a second 401 goes back to the client.
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil // the body cannot be sent again
	}
	if rm := resourceMetadata(resp.Header); rm != "" && t.discovery != nil {
		var err error
		t.discovered.Do(func() { err = t.discovery.discover(req.Context(), rm) })
		if err != nil {
			_ = resp.Body.Close()
			return nil, err
		}
	}
	t.refused(t.oauth2, token)
	fresh, err := t.token()
	if err != nil || fresh == token {
		return resp, nil
	}
	retry := req.Clone(req.Context())
	retry.Header = out.Header.Clone()
	retry.Header.Set("Authorization", "Bearer "+fresh)
	if req.GetBody != nil {
		if retry.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return t.base.RoundTrip(retry)
}

// token is the current bearer of the auth secret, registered for
// redaction.
func (t *credentialTransport) token() (string, error) {
	v, err := t.secret(t.oauth2)
	if err != nil {
		return "", fmt.Errorf("[[mcp_servers]] %q: auth: secret %s: %s", t.server, t.oauth2, runtime.Redact(err.Error()))
	}
	runtime.RedactValue(v)
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("[[mcp_servers]] %q: auth: secret %s is empty or contains CR, LF or NUL; refused", t.server, t.oauth2)
	}
	return v, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// resolve fills one header's placeholders. Errors name the server, the
// header and the secret, never a value.
func (t *credentialTransport) resolve(name string) (string, error) {
	var b strings.Builder
	for _, part := range rules.SplitHeaderValue(t.headers[name]) {
		if part.Secret == "" {
			b.WriteString(part.Text)
			continue
		}
		v, err := t.secret(part.Secret)
		if err != nil {
			return "", fmt.Errorf("[[mcp_servers]] %q: header %s: secret %s: %s", t.server, name, part.Secret, runtime.Redact(err.Error()))
		}
		runtime.RedactValue(v)
		if strings.ContainsAny(v, "\r\n\x00") {
			return "", fmt.Errorf("[[mcp_servers]] %q: header %s: secret %s contains CR, LF or NUL; refused", t.server, name, part.Secret)
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
