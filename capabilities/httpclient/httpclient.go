// Package httpclient is the outbound HTTP family: the http_request node.
//
// The client speaks HTTP/1.1 over http:// and https://, never follows a
// redirect (a 3xx comes back to the workflow on the "error" branch, since
// the policy vetted this URL, not the Location), caps request and response
// bodies at 1 MiB, and gives each request 30 s within the run deadline.
// The policy check (method and URL) runs before anything is dialled.
//
// SSRF guard (capabilities/internal/netguard): the dialer checks every
// address it actually connects to (after DNS, so rebinding does not help)
// and refuses every address that is not public unicast unless the
// [policy.http] pattern that allowed the URL names its host explicitly.
// A named host may then also reach loopback, private and shared (CGNAT)
// addresses, but link-local and cloud metadata addresses only when the
// pattern names that exact IP literal (http://169.254.169.254/...). With
// no [policy] block (allow-all, development) nothing is named explicitly,
// so private addresses are refused there too: declare [policy.http] urls
// = ["http://127.0.0.1:8080/**"] to reach a local service. No proxy from
// the environment is used.
//
// Every request carries Idempotency-Key: the node's runtime.Call
// IdempotencyKey, the same on a retry and after a resume, unless the node
// declares that header itself.
//
// Declared headers ([nodes.headers]) are literals plus {{secret:NAME}}
// placeholders resolved at request time through Services.Secret; values
// are never interpolated from the run context. Every resolved secret is
// registered with runtime.RedactValue. The node output is data and keeps
// what the server sent, a secret it echoed included: redaction happens at
// the sinks (logs, outcome, records, checkpoints, replies), never in data.
// A CR or LF in a header is refused.
package httpclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"regexp"
	"strings"
	"time"

	httpspec "github.com/kilnworks/kiln/capabilities/httpclient/spec"
	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	// MaxBody caps request and response bodies.
	MaxBody = 1 << 20
	// DefaultTimeout bounds one request (within the run deadline).
	DefaultTimeout = 30 * time.Second
)

// KindHTTPRequest is the node kind of this family. No build registers it from
// init: a generated program registers it when its workflow uses it, and
// RegisterKinds registers it for binaries that link the whole family.
var KindHTTPRequest = runtime.NodeKind{Kind: "http_request", Family: "httpclient", Prepare: prepare, SideEffect: true}

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindHTTPRequest)
}

var (
	tokenPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// Headers the client owns; declaring them would desynchronise framing
	// or routing.
	reserved = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Te": true, "Upgrade": true, "Trailer": true}
)

// header is one declared header, split into literal text and secret names.
type header struct {
	name  string
	parts []rules.HeaderPart
}

func parseHeader(name, value string) (header, error) {
	if !tokenPattern.MatchString(name) {
		return header{}, fmt.Errorf("header name %q is not a valid HTTP token", name)
	}
	canon := http.CanonicalHeaderKey(name)
	if reserved[canon] {
		return header{}, fmt.Errorf("header %s is set by the client and cannot be declared", canon)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return header{}, fmt.Errorf("header %s: CR, LF and NUL are refused in header values", canon)
	}
	h := header{name: canon, parts: rules.SplitHeaderValue(value)}
	if last := len(h.parts) - 1; last >= 0 && h.parts[last].Secret == "" && strings.Contains(h.parts[last].Text, "{{secret:") {
		return header{}, fmt.Errorf("header %s: malformed {{secret:NAME}} placeholder", canon)
	}
	return h, nil
}

func prepare(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	// The runtime is more lenient than the dialect (CheckHTTPRequest): it
	// upper-cases the method and resolves undeclared secrets from the
	// environment, so only the required keys are checked the same way.
	if err := spec.Err(httpspec.CheckRequest(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	method := strings.ToUpper(n.Method)
	if !tokenPattern.MatchString(method) {
		return nil, fmt.Errorf("method %q is not a valid HTTP method", n.Method)
	}
	var headers []header
	for _, name := range runtime.SortedKeys(n.Headers) {
		h, err := parseHeader(name, n.Headers[name])
		if err != nil {
			return nil, err
		}
		headers = append(headers, h)
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return do(ctx, c, method, headers)
	}, nil
}

func do(ctx context.Context, c *runtime.Call, method string, headers []header) (runtime.Result, error) {
	url, err := c.FromString("url_from", c.Node.URLFrom)
	if err != nil {
		return runtime.Result{}, err
	}
	body, isJSON, err := requestBody(c)
	if err != nil {
		return runtime.Result{}, err
	}
	explicit, err := c.Run.Policy().HTTP(policyRequest(method, url))
	if err != nil {
		return runtime.Result{}, err
	}
	if c.DryRun() {
		return runtime.Next(map[string]any{"method": method, "url": url, "dry_run": true}), nil
	}

	// Through the run's recording/replay seam. The request recorded is
	// what the workflow decides (method, URL, body, declared headers with
	// their {{secret:NAME}} placeholders, never a secret's value), so a
	// replay compares it without resolving a secret.
	return runtime.Interact(ctx, c, "http.request", recordedRequest(method, url, body, headers),
		func() (runtime.Result, error) {
			c.AuditEffect("http.request", method+" "+auditHost(url))
			return send(ctx, c, method, url, body, isJSON, explicit, headers)
		})
}

// auditHost is the host[:port] of a URL the policy allowed, for the audit
// log: never its path, query or user info, which may carry secrets.
func auditHost(raw string) string {
	if u, err := neturl.Parse(raw); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return "(unparsable URL)"
}

// recordedRequest is the request as recording and replay see it.
func recordedRequest(method, url string, body []byte, headers []header) map[string]any {
	hs := map[string]any{}
	for _, h := range headers {
		var b strings.Builder
		for _, p := range h.parts {
			if p.Secret != "" {
				b.WriteString("{{secret:" + p.Secret + "}}")
			} else {
				b.WriteString(p.Text)
			}
		}
		hs[h.name] = b.String()
	}
	return map[string]any{"method": method, "url": url, "body": string(body), "headers": hs}
}

// send performs the request and reads the response.
func send(ctx context.Context, c *runtime.Call, method, url string, body []byte, isJSON, explicit bool, headers []header) (runtime.Result, error) {
	reqCtx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, method, url, bytes.NewReader(body))
	if err != nil {
		return runtime.Result{}, c.Errorf(runtime.ClassTool, "build request: %v", err)
	}
	// What the dialer may connect to travels with the request to its
	// Control hook, which judges the address actually dialled.
	client, reach := guarded, netguard.Reach{}
	if explicit {
		client, reach = named, netguard.NamedHost(req.URL.Hostname())
	}
	req = req.WithContext(netguard.WithReach(reqCtx, reach))
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Header.Set("User-Agent", "kiln-http_request")
	req.Header.Set("Idempotency-Key", c.IdempotencyKey()) // a declared one replaces it below
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	if tp := traceparent(ctx, c); tp != "" {
		req.Header.Set("Traceparent", tp)
	}
	for _, h := range headers {
		v, err := resolveHeader(c, h)
		if err != nil {
			return runtime.Result{}, err
		}
		req.Header.Set(h.name, v)
	}

	resp, err := client.Do(req)
	if err != nil {
		return runtime.Result{}, transportError(ctx, reqCtx, c, method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return runtime.Result{}, transportError(ctx, reqCtx, c, method, url, err)
	}
	if len(raw) > MaxBody {
		return runtime.Result{}, c.Errorf(runtime.ClassTool, "%s %s: response body exceeds the 1 MiB cap", method, runtime.Redact(url))
	}
	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": responseHeaders(resp.Header),
		"body":    strings.ToValidUTF8(string(raw), "\uFFFD"),
		"bytes":   len(raw),
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return runtime.NextBranch(out, "error"), nil
	}
	return runtime.Next(out), nil
}

// requestBody renders body_from: strings as-is, anything else as JSON.
func requestBody(c *runtime.Call) (body []byte, isJSON bool, err error) {
	if c.Node.BodyFrom == "" {
		return nil, false, nil
	}
	v, found := c.Lookup(c.Node.BodyFrom)
	if !found {
		return nil, false, c.Errorf(runtime.ClassTool, "body_from %q did not resolve to a value", c.Node.BodyFrom)
	}
	if s, ok := v.(string); ok {
		body = []byte(s)
	} else {
		if body, err = runtime.EncodeJSON(v); err != nil {
			return nil, false, c.Errorf(runtime.ClassTool, "encode body: %v", err)
		}
		isJSON = true
	}
	if len(body) > MaxBody {
		return nil, false, c.Errorf(runtime.ClassTool, "request body of %d bytes exceeds the 1 MiB cap", len(body))
	}
	return body, isJSON, nil
}

// resolveHeader fills a header's secret placeholders. Errors name the
// header and the secret, never a value.
func resolveHeader(c *runtime.Call, h header) (string, error) {
	var b strings.Builder
	for _, p := range h.parts {
		if p.Secret == "" {
			b.WriteString(p.Text)
			continue
		}
		v, err := c.Run.Services().SecretValue(p.Secret)
		if err != nil {
			return "", c.Errorf(runtime.ClassConfig, "header %s: %v", h.name, err)
		}
		runtime.RedactValue(v)
		if strings.ContainsAny(v, "\r\n\x00") {
			return "", c.Errorf(runtime.ClassConfig, "header %s: secret %s contains CR, LF or NUL; refused", h.name, p.Secret)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// traceparent is the W3C trace context to forward: the one on ctx (set by
// the HTTP server), else a valid trigger.traceparent.
func traceparent(ctx context.Context, c *runtime.Call) string {
	if tp := runtime.Traceparent(ctx); tp != "" {
		return tp
	}
	if tp, ok := c.Run.Trigger()["traceparent"].(string); ok && runtime.ValidTraceparent(tp) {
		return tp
	}
	return ""
}

func responseHeaders(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for k, vs := range h {
		out[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return out
}

// transportError classifies a failed exchange: SSRF refusal (a policy
// denial), run deadline (timeout), the request's own timeout, or a tool
// error (retryable).
func transportError(ctx, reqCtx context.Context, c *runtime.Call, method, url string, err error) error {
	url = runtime.Redact(url)
	var blocked *netguard.Blocked
	if errors.As(err, &blocked) {
		hint := "name the host explicitly in [policy.http] urls to allow it"
		if blocked.LiteralOnly {
			hint = "only a [policy.http] url naming this IP literal allows it, not a host name resolving to it"
		}
		return runtime.Denied("http.request", url, fmt.Sprintf("resolves to %s address %s; %s", blocked.Why, blocked.Addr, hint))
	}
	if ctx.Err() != nil {
		return c.Errorf(runtime.ClassTimeout, "%s %s: run deadline reached", method, url)
	}
	if reqCtx.Err() != nil {
		return c.Errorf(runtime.ClassTool, "%s %s: no complete response within %v", method, url, Timeout)
	}
	return c.Errorf(runtime.ClassTool, "%s %s: %v", method, url, runtime.Redact(unwrapURL(err).Error()))
}

func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// Timeout bounds one request; tests shorten it.
var Timeout = DefaultTimeout

// guarded carries requests to hosts no pattern names, named those to
// hosts a pattern names. Both dial through the netguard Control hook; the
// separate transports keep their connection pools apart, so a connection
// a named request opened to a private address is never reused by a
// request the guard would have refused.
var guarded, named = newClient(nil), newClient(nil)

// setRootCAs replaces the clients with ones trusting pool (tests).
func setRootCAs(pool *x509.CertPool) {
	guarded, named = newClient(pool), newClient(pool)
}

func newClient(roots *x509.CertPool) *http.Client {
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            netguard.Dialer().DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 256 << 10,
		IdleConnTimeout:        90 * time.Second,
		// HTTP/1.1 only, like the reference.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	return &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// policyRequest is what the policy checks of a request to rawURL; a URL
// that does not parse leaves the parts empty, which the policy refuses.
func policyRequest(method, rawURL string) policy.HTTPRequest {
	r := policy.HTTPRequest{Method: method, URL: rawURL}
	if u, err := neturl.Parse(rawURL); err == nil {
		r.Scheme, r.Host, r.Path = u.Scheme, u.Host, u.Path
	}
	return r
}
