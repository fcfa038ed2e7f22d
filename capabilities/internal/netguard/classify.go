package netguard

import (
	"fmt"
	"net/netip"
)

// Class is how far a Reach must go to allow an address.
type Class int

const (
	// Public: globally routed unicast; every reach allows it.
	Public Class = iota
	// Local: loopback, private, shared and other local-use ranges; a
	// named host allows it.
	Local
	// Reserved: link-local, cloud metadata, and addresses that are never
	// a unicast destination (unspecified, multicast, broadcast, reserved,
	// deprecated or translation forms whose target cannot be vetted);
	// only a pattern naming the exact IP literal allows it.
	Reserved
)

// metadata are the cloud instance metadata and host agent endpoints. Most
// are link-local anyway; the others sit in ranges a named host may reach
// (CGNAT, unique local, the IETF /24) or in public space (Azure), so they
// are listed by address.
var metadata = map[netip.Addr]string{
	netip.MustParseAddr("169.254.169.254"): "cloud metadata",              // AWS, GCP, Azure, OpenStack, ...
	netip.MustParseAddr("169.254.170.2"):   "cloud metadata (AWS ECS)",    // task credentials
	netip.MustParseAddr("169.254.170.23"):  "cloud metadata (AWS EKS)",    // pod identity agent
	netip.MustParseAddr("fd00:ec2::254"):   "cloud metadata (AWS IMDS)",   // IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"):    "cloud metadata (AWS EKS)",    // pod identity agent over IPv6
	netip.MustParseAddr("fd20:ce::254"):    "cloud metadata (GCP)",        // metadata server over IPv6
	netip.MustParseAddr("100.100.100.200"): "cloud metadata (Alibaba)",    // in CGNAT space
	netip.MustParseAddr("168.63.129.16"):   "cloud host agent (Azure)",    // WireServer, public space
	netip.MustParseAddr("192.0.0.192"):     "cloud metadata (Oracle)",     // OCI Classic
	netip.MustParseAddr("fe80::a9fe:a9fe"): "cloud metadata (link-local)", // OpenStack over IPv6
}

type span struct {
	prefix netip.Prefix
	class  Class
	why    string
}

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// v4 are the IPv4 special-purpose ranges (IANA registry); the first match
// wins. Anything else is public.
var v4 = []span{
	{p("0.0.0.0/8"), Reserved, "unspecified (this network)"},
	{p("127.0.0.0/8"), Local, "loopback"},
	{p("10.0.0.0/8"), Local, "private"},
	{p("172.16.0.0/12"), Local, "private"},
	{p("192.168.0.0/16"), Local, "private"},
	{p("100.64.0.0/10"), Local, "shared (CGNAT)"},
	{p("169.254.0.0/16"), Reserved, "link-local"},
	{p("192.0.0.0/24"), Local, "IETF protocol assignment"},
	{p("192.0.2.0/24"), Local, "documentation"},
	{p("198.51.100.0/24"), Local, "documentation"},
	{p("203.0.113.0/24"), Local, "documentation"},
	{p("192.88.99.0/24"), Local, "6to4 relay anycast"},
	{p("198.18.0.0/15"), Local, "benchmarking"},
	{p("224.0.0.0/4"), Reserved, "multicast"},
	{p("255.255.255.255/32"), Reserved, "broadcast"},
	{p("240.0.0.0/4"), Reserved, "reserved (240/4)"},
}

// v6 are the IPv6 special-purpose ranges not handled as embedded IPv4
// forms; the first match wins. Outside them only 2000::/3 is public.
var v6 = []span{
	{p("::1/128"), Local, "loopback"},
	{p("::/128"), Reserved, "unspecified"},
	{p("fe80::/10"), Reserved, "link-local"},
	{p("fec0::/10"), Reserved, "site-local (deprecated)"},
	{p("ff00::/8"), Reserved, "multicast"},
	{p("fc00::/7"), Local, "private (unique local)"},
	{p("100::/64"), Reserved, "discard-only"},
	{p("64:ff9b:1::/48"), Reserved, "local-use NAT64"},
	{p("::ffff:0:0:0/96"), Reserved, "IPv4-translated"},
	{p("2001::/32"), Reserved, "Teredo"},
	{p("2001:2::/48"), Local, "benchmarking"},
	{p("2001::/23"), Local, "IETF protocol assignment"},
	{p("2001:db8::/32"), Local, "documentation"},
	{p("3fff::/20"), Local, "documentation"},
}

var global6 = p("2000::/3")

// embedded are the IPv6 forms that carry an IPv4 address: the address is
// classified by that IPv4 address too, and is never public itself.
var embedded = []struct {
	prefix netip.Prefix
	at     int // byte offset of the IPv4 address
	class  Class
	why    string
}{
	{p("::/96"), 12, Reserved, "IPv4-compatible"},
	{p("64:ff9b::/96"), 12, Local, "NAT64"},
	{p("2002::/16"), 2, Local, "6to4"},
}

// Classify returns addr's class and, unless it is public, why.
func Classify(addr netip.Addr) (Class, string) {
	addr = addr.Unmap().WithZone("")
	if why, ok := metadata[addr]; ok {
		return Reserved, why
	}
	if addr.Is4() {
		c, why, _ := lookup(v4, addr)
		return c, why
	}
	if c, why, ok := lookup(v6, addr); ok {
		return c, why
	}
	for _, e := range embedded {
		if !e.prefix.Contains(addr) {
			continue
		}
		b := addr.As16()
		inner := netip.AddrFrom4([4]byte(b[e.at : e.at+4]))
		c, why := Classify(inner)
		if why == "" {
			why = "public"
		}
		return max(c, e.class), fmt.Sprintf("%s (embeds %s %s)", e.why, why, inner)
	}
	if !global6.Contains(addr) {
		return Reserved, "not global unicast"
	}
	return Public, ""
}

// lookup returns the first span containing addr.
func lookup(spans []span, addr netip.Addr) (Class, string, bool) {
	for _, s := range spans {
		if s.prefix.Contains(addr) {
			return s.class, s.why, true
		}
	}
	return Public, "", false
}
