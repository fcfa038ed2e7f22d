package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
)

// maxMetadata caps a discovery document.
const maxMetadata = 64 << 10

// metadataClient fetches discovery documents: guarded like every url
// server's requests, no redirect (a document must come from the URL that
// was checked), 30 s per document.
var metadataClient = &http.Client{
	Transport:     httpTransport,
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

var resourceMetadataParam = regexp.MustCompile(`(?i)\bresource_metadata\s*=\s*"([^"]*)"`)

// resourceMetadata is the resource_metadata parameter of a Bearer
// challenge (RFC 9728 §5.1), or "".
func resourceMetadata(h http.Header) string {
	for _, v := range h.Values("WWW-Authenticate") {
		if m := resourceMetadataParam.FindStringSubmatch(v); m != nil {
			return m[1]
		}
	}
	return ""
}

// discoverer finds a url server's token endpoint from a 401: the
// protected resource metadata (RFC 9728) names the authorization server,
// whose metadata (RFC 8414) names the token endpoint. Every URL is
// checked before it is requested: http(s), no credentials, a host that
// is the server's own or in auth.hosts (the network needs), and allowed
// by [policy.http]. The token endpoint found is handed to the secrets
// registry, which fetches tokens there with the declared client
// credentials.
type discoverer struct {
	server   string
	origin   *url.URL
	hosts    []string
	policy   *policy.Policy
	retarget func(tokenURL string) error
}

func (d *discoverer) discover(ctx context.Context, metadataURL string) error {
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := d.fetch(ctx, "resource_metadata", metadataURL, &prm); err != nil {
		return err
	}
	// RFC 9728 §3.3: the metadata must be about this server.
	if r, err := url.Parse(prm.Resource); err != nil || !sameOrigin(r, d.origin) {
		return d.errorf("protected resource metadata %s is about %q, not this server", metadataURL, prm.Resource)
	}
	if len(prm.AuthorizationServers) == 0 {
		return d.errorf("protected resource metadata %s names no authorization server", metadataURL)
	}
	issuer := prm.AuthorizationServers[0]
	iu, err := d.check("authorization server", issuer, http.MethodGet)
	if err != nil {
		return err
	}
	// RFC 8414 §3.1: the well-known segment goes before the issuer's path.
	wellKnown := *iu
	wellKnown.Path = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(iu.Path, "/")
	wellKnown.RawPath, wellKnown.RawQuery, wellKnown.Fragment = "", "", ""
	var as struct {
		Issuer        string `json:"issuer"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := d.fetch(ctx, "authorization server metadata", wellKnown.String(), &as); err != nil {
		return err
	}
	if as.Issuer != issuer { // RFC 8414 §3.3
		return d.errorf("authorization server metadata of %s names issuer %q", issuer, as.Issuer)
	}
	if _, err := d.check("token_endpoint", as.TokenEndpoint, http.MethodPost); err != nil {
		return err
	}
	if err := d.retarget(as.TokenEndpoint); err != nil {
		return d.errorf("%v", err)
	}
	return nil
}

// check refuses a URL discovery may not reach, before any request to it.
func (d *discoverer) check(what, raw, method string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, d.errorf("%s %q is not an absolute http(s) URL without credentials", what, raw)
	}
	host := u.Hostname()
	if !strings.EqualFold(host, d.origin.Hostname()) &&
		!slices.ContainsFunc(d.hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return nil, d.errorf("%s %s is on host %s, which is neither the server's host nor in auth.hosts; refused", what, raw, host)
	}
	if d.policy != nil {
		if _, err := d.policy.HTTP(policy.HTTPRequest{Method: method, URL: raw, Scheme: u.Scheme, Host: u.Host, Path: u.Path}); err != nil {
			return nil, d.errorf("%s %s: %v", what, raw, err)
		}
	}
	return u, nil
}

// fetch checks raw and decodes the JSON document there into v.
func (d *discoverer) fetch(ctx context.Context, what, raw string, v any) error {
	if _, err := d.check(what, raw, http.MethodGet); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return d.errorf("%s %s: %v", what, raw, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := metadataClient.Do(req)
	if err != nil {
		return d.errorf("%s %s: %s", what, raw, runtime.Redact(unwrapURLError(err).Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return d.errorf("%s %s answered %d", what, raw, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return d.errorf("%s %s: %v", what, raw, err)
	}
	if len(body) > maxMetadata {
		return d.errorf("%s %s exceeds %d bytes", what, raw, maxMetadata)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return d.errorf("%s %s is not a JSON object: %v", what, raw, err)
	}
	return nil
}

func (d *discoverer) errorf(format string, args ...any) error {
	return fmt.Errorf("[[mcp_servers]] %q: auth discovery: %s", d.server, fmt.Sprintf(format, args...))
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
