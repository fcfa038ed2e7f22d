package catalog_test

import (
	"regexp"
	"testing"

	"github.com/kilnworks/kiln/capabilities/catalog"
)

// TestWireKeys holds every catalog key's OpenWOP identifier to the
// protocol's two forms, one identifier per key, and resolvable back to the
// family that provides the key.
func TestWireKeys(t *testing.T) {
	dotted := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)+$`)
	hostExt := regexp.MustCompile(`^x-host-kiln-[a-z][a-z0-9-]*$`)
	seen := map[string]string{}
	for _, k := range catalog.Keys() {
		w := catalog.WireKey(k)
		if !dotted.MatchString(w) && !hostExt.MatchString(w) {
			t.Errorf("%s -> %q: neither an OpenWOP dotted identifier nor x-host-kiln-<key>", k, w)
		}
		if other, dup := seen[w]; dup {
			t.Errorf("%s and %s both advertise %q", k, other, w)
		}
		seen[w] = k
		fk, _ := catalog.FamilyOfKey(k)
		if fw, ok := catalog.FamilyOfKey(w); !ok || fw != fk {
			t.Errorf("FamilyOfKey(%q) = %q, %v; want %q", w, fw, ok, fk)
		}
	}
	if got := catalog.WireKey("mcp.tools"); got != "host.mcp" {
		t.Errorf("mcp.tools -> %q, want host.mcp", got)
	}
	if got := catalog.WireKey("trigger.fs_watch"); got != "x-host-kiln-trigger-fs-watch" {
		t.Errorf("trigger.fs_watch -> %q", got)
	}
}
