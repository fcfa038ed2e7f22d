// Package netguard is the SSRF guard of outbound dialers: a net.Dialer
// ControlContext hook that classifies the address a connection is about
// to be made to (after DNS, so a rebinding answer is judged too) and
// refuses it unless the request's Reach admits it.
//
// Three reaches:
//   - public (the zero Reach): only globally routed unicast addresses;
//   - named host (a policy pattern names the host): also loopback,
//     private, shared (CGNAT) and other local-use ranges, so a workflow
//     can call a service on 127.0.0.1 or 10.x it names;
//   - named IP literal: that exact address, whatever it is.
//
// Link-local addresses, cloud metadata endpoints and addresses that are
// never a unicast destination are refused for a named host: only a policy
// pattern naming the exact IP literal reaches them, so a DNS answer for an
// allowed public name cannot lead to 169.254.169.254.
//
// Clients that only reach URLs the workflow or operator configured (token
// endpoints, intelligence backends, MCP servers, collectors) use
// Transport, which gives each such URL's host the named-host reach.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Reach is what one request may connect to.
type Reach struct {
	// Named: a policy pattern names the host (see the package comment).
	Named bool
	// Literal is the IP literal a pattern names (valid only with Named):
	// that address alone is allowed whatever its class.
	Literal netip.Addr
}

// NamedHost is the reach of a request to host (a URL's hostname, without
// port or brackets) that a policy pattern names.
func NamedHost(host string) Reach {
	r := Reach{Named: true}
	if a, err := netip.ParseAddr(host); err == nil {
		r.Literal = a.Unmap()
	}
	return r
}

type reachKey struct{}

// WithReach returns ctx carrying r for the dialer's Control hook.
func WithReach(ctx context.Context, r Reach) context.Context {
	return context.WithValue(ctx, reachKey{}, r)
}

// ReachOf returns the reach ctx carries; none is the public reach.
func ReachOf(ctx context.Context) Reach {
	r, _ := ctx.Value(reachKey{}).(Reach)
	return r
}

// Blocked is the guard's refusal of an address.
type Blocked struct {
	Addr netip.Addr
	Why  string // e.g. "loopback", "link-local", "cloud metadata"
	// LiteralOnly: only a pattern naming this IP literal allows it (naming
	// a host that resolves to it is not enough).
	LiteralOnly bool
}

func (b *Blocked) Error() string {
	return fmt.Sprintf("refusing to connect to %s address %s", b.Why, b.Addr)
}

// Control is a net.Dialer ControlContext hook: it runs on the address
// actually being connected to, with the Reach of ctx.
func Control(ctx context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Blocked{Why: "unparsable", LiteralOnly: true}
	}
	return ReachOf(ctx).Check(ap.Addr())
}

// Check decides whether a connection to addr may be made.
func (r Reach) Check(addr netip.Addr) error {
	addr = addr.Unmap() // a mapped address is the IPv4 address itself
	c, why := Classify(addr)
	switch {
	case c == Public:
		return nil
	case r.Named && r.Literal.IsValid() && addr == r.Literal:
		return nil
	case r.Named && c == Local:
		return nil
	}
	return &Blocked{Addr: addr, Why: why, LiteralOnly: c == Reserved}
}

// Dialer returns a TCP dialer guarded by Control.
func Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, ControlContext: Control}
}
