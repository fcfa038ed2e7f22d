package netguard

import (
	"net/http"
	"strings"
	"time"
)

// Transport is the HTTP transport of a client that is only ever handed
// URLs the workflow or its operator configured: a token endpoint, an
// intelligence backend, an MCP server, a trace collector. Configuring a
// URL names its host, as a [policy.http] pattern does, so each request
// dials with the named-host reach of its host (loopback and private
// addresses work, link-local and metadata addresses only when the URL is
// that IP literal). A redirect keeps that reach only on the host the
// client was handed; another host gets the public reach.
//
// No proxy is taken from the environment: a proxy dials the destination
// itself, out of the guard's sight.
type Transport struct{ *http.Transport }

// NewTransport returns a Transport with net/http's default pooling,
// HTTP/2 and timeouts, dialling through Control. Callers may adjust the
// embedded http.Transport (TLS settings) before first use.
func NewTransport() *Transport {
	return &Transport{&http.Transport{
		Proxy:                 nil,
		DialContext:           Dialer().DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// RoundTrip sends req with the reach of its host (see Transport).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// http.Client links a redirect to the response that caused it; the
	// first request of the chain is the URL the client was handed.
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	reach := Reach{}
	if host := req.URL.Hostname(); strings.EqualFold(host, first.URL.Hostname()) {
		reach = NamedHost(host)
	}
	return t.Transport.RoundTrip(req.WithContext(WithReach(req.Context(), reach)))
}
