package catalog

import "strings"

// OpenWOP names a capability the way an OpenWOP client reads it from
// GET /.well-known/openwop (docs/openwop.md): the protocol's own dotted
// identifier where it has one, else kiln's host-extension form
// x-host-kiln-<key> (the protocol reserves x-host-<host>- for hosts).
var openWOP = map[string]string{
	// The MCP client half is the protocol's host.mcp surface.
	"mcp.tools": "host.mcp",
}

// HostExtensionPrefix starts every capability key kiln advertises under its
// own host-extension namespace.
const HostExtensionPrefix = "x-host-kiln-"

// WireKey returns the OpenWOP identifier of catalog key k.
func WireKey(k string) string {
	if w, ok := openWOP[k]; ok {
		return w
	}
	// The host-extension pattern allows only [a-z0-9-] after the prefix.
	return HostExtensionPrefix + strings.Map(func(r rune) rune {
		if r == '.' || r == '_' {
			return '-'
		}
		return r
	}, k)
}

// WireKeys returns the OpenWOP identifiers of keys, in the same order.
func WireKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = WireKey(k)
	}
	return out
}
