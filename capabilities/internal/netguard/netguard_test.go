package netguard

import (
	"bufio"
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// hostileCase is one line of testdata/hostile/net/ssrf-addresses.txt.
type hostileCase struct {
	line                   int
	addr                   netip.Addr
	public, named, literal bool // allowed?
	reason                 string
}

func hostileCases(t *testing.T) []hostileCase {
	t.Helper()
	f, err := os.Open("../../../testdata/hostile/net/ssrf-addresses.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []hostileCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 5 {
			t.Fatalf("ssrf-addresses.txt:%d: want address, public, named, literal, reason", n)
		}
		addr, err := netip.ParseAddr(fields[0])
		if err != nil {
			t.Fatalf("ssrf-addresses.txt:%d: %v", n, err)
		}
		verdict := func(s string) bool {
			if s != "allow" && s != "deny" {
				t.Fatalf("ssrf-addresses.txt:%d: verdict %q, want allow or deny", n, s)
			}
			return s == "allow"
		}
		out = append(out, hostileCase{line: n, addr: addr, public: verdict(fields[1]), named: verdict(fields[2]),
			literal: verdict(fields[3]), reason: strings.Join(fields[4:], " ")})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("only %d cases read", len(out))
	}
	return out
}

// dial runs the Control hook as the dialer would for addr:443 under r.
func dial(r Reach, addr netip.Addr) error {
	ctx := WithReach(context.Background(), r)
	return Control(ctx, "tcp", netip.AddrPortFrom(addr, 443).String(), nil)
}

// TestHostileAddresses: every range of the table, under the three
// reaches, through the Control hook (no connection is made).
func TestHostileAddresses(t *testing.T) {
	for _, c := range hostileCases(t) {
		named := Reach{Named: true} // a hostname that resolved to addr
		literal := NamedHost(c.addr.String())
		for _, r := range []struct {
			name  string
			reach Reach
			allow bool
		}{{"public", Reach{}, c.public}, {"named", named, c.named}, {"literal", literal, c.literal}} {
			err := dial(r.reach, c.addr)
			if r.allow {
				if err != nil {
					t.Errorf("line %d: %s under %s reach: refused (%v), want allowed", c.line, c.addr, r.name, err)
				}
				continue
			}
			var b *Blocked
			if !errors.As(err, &b) {
				t.Errorf("line %d: %s under %s reach: %v, want a refusal", c.line, c.addr, r.name, err)
				continue
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("line %d: %s under %s reach: %q does not say %q", c.line, c.addr, r.name, err, c.reason)
			}
			if b.LiteralOnly != !c.named {
				t.Errorf("line %d: %s: LiteralOnly = %v, want %v", c.line, c.addr, b.LiteralOnly, !c.named)
			}
		}
	}
}

// TestNamedLiteralIsThatAddressOnly: naming 169.254.169.254 does not open
// its neighbours, another metadata address, or its IPv6 spellings other
// than the mapped one (which is the IPv4 address itself).
func TestNamedLiteralIsThatAddressOnly(t *testing.T) {
	r := NamedHost("169.254.169.254")
	for _, a := range []string{"169.254.169.253", "169.254.170.2", "100.100.100.200", "fd00:ec2::254",
		"64:ff9b::169.254.169.254", "::169.254.169.254", "2002:a9fe:a9fe::1"} {
		if err := dial(r, netip.MustParseAddr(a)); err == nil {
			t.Errorf("%s allowed by a pattern naming 169.254.169.254", a)
		}
	}
	if err := dial(r, netip.MustParseAddr("::ffff:169.254.169.254")); err != nil {
		t.Errorf("mapped form of the named literal: %v", err)
	}
	// A hostname is never a literal.
	if r := NamedHost("metadata.google.internal"); r.Literal.IsValid() {
		t.Fatalf("hostname parsed as a literal: %+v", r)
	}
}

func TestControlEdges(t *testing.T) {
	ctx := context.Background() // no reach: public
	for _, address := range []string{"127.0.0.1:80", "[::1]:80", "[fe80::1%lo]:80", "[::ffff:127.0.0.1]:80", "localhost:80", "garbage", ""} {
		if err := Control(ctx, "tcp", address, nil); err == nil {
			t.Errorf("%q allowed without a reach", address)
		}
	}
	// A zoned link-local address is link-local for a named host too; the
	// named literal with its zone is allowed.
	named := WithReach(ctx, Reach{Named: true})
	if err := Control(named, "tcp", "[fe80::1%lo]:80", nil); err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("zoned link-local for a named host: %v", err)
	}
	if err := Control(WithReach(ctx, NamedHost("fe80::1%lo")), "tcp", "[fe80::1%lo]:80", nil); err != nil {
		t.Errorf("named zoned literal: %v", err)
	}
	if err := Control(ctx, "tcp", "8.8.8.8:443", nil); err != nil {
		t.Errorf("public address: %v", err)
	}
}
