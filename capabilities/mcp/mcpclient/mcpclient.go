// Package mcpclient holds the MCP client interface of the mcp family and
// where a run finds its client: the MCP nodes use the server pool, the
// fixture runner a mock, neither linking the other.
package mcpclient

import (
	"context"

	"github.com/kilnworks/kiln/runtime"
)

// Client reaches MCP servers by name ("" = the default server). Results
// are the raw JSON objects of tools/call and resources/read.
type Client interface {
	CallTool(ctx context.Context, server, tool string, args map[string]any) (map[string]any, error)
	ReadResource(ctx context.Context, server, uri string) (map[string]any, error)
}

type key struct{}

// SetClient makes c the MCP client of svc's runs.
func SetClient(svc *runtime.Services, c Client) { svc.Values.Store(key{}, c) }

// ClientFrom returns the client SetClient gave svc; nil when none was
// given.
func ClientFrom(svc *runtime.Services) Client {
	if svc == nil {
		return nil
	}
	v, _ := svc.Values.Load(key{})
	c, _ := v.(Client)
	return c
}
