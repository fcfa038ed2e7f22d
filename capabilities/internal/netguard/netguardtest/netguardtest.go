// Package netguardtest lets a test give host names the addresses it
// wants (a name resolving to 0.0.0.0 or 127.0.0.1), so a client can be
// shown to refuse or reach a configured host by name, after DNS, as in
// production. Tests only.
package netguardtest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Resolve makes the process resolver answer names (without a trailing
// dot, any case) with their addresses and every other name with
// NXDOMAIN, until the test ends. The answers come from a DNS server on
// 127.0.0.1; /etc/hosts still comes first. It replaces net.DefaultResolver,
// so the test must not run in parallel with others.
func Resolve(t testing.TB, names map[string]string) {
	t.Helper()
	zone := map[string]netip.Addr{}
	for name, addr := range names {
		zone[strings.ToLower(name)+"."] = netip.MustParseAddr(addr)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(pc, zone)
	}()
	old := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	t.Cleanup(func() {
		net.DefaultResolver = old
		pc.Close()
		<-done
	})
}

// serve answers each query on pc from zone until pc is closed.
func serve(pc net.PacketConn, zone map[string]netip.Addr) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if reply, err := answer(buf[:n], zone); err == nil {
			pc.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to one query: the name's address when the
// question asks for its family, no record for the other family, NXDOMAIN
// for a name not in zone.
func answer(query []byte, zone map[string]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	addr, known := zone[strings.ToLower(q.Name.String())]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	switch {
	case known && q.Type == dnsmessage.TypeA && addr.Is4():
		err = b.AResource(rr, dnsmessage.AResource{A: addr.As4()})
	case known && q.Type == dnsmessage.TypeAAAA && addr.Is6():
		err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: addr.As16()})
	}
	if err != nil {
		return nil, err
	}
	return b.Finish()
}
