package mcpclient_test

import (
	"context"
	"testing"

	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	"github.com/kilnworks/kiln/runtime"
)

type stub struct{}

func (stub) CallTool(context.Context, string, string, map[string]any) (map[string]any, error) {
	return map[string]any{}, nil
}

func (stub) ReadResource(context.Context, string, string) (map[string]any, error) {
	return map[string]any{}, nil
}

func TestClientFrom(t *testing.T) {
	if mcpclient.ClientFrom(nil) != nil || mcpclient.ClientFrom(&runtime.Services{}) != nil {
		t.Fatal("services without a client returned one")
	}
	svc := &runtime.Services{}
	var c mcpclient.Client = stub{}
	mcpclient.SetClient(svc, c)
	if got := mcpclient.ClientFrom(svc); got != c {
		t.Fatalf("ClientFrom = %v, want the client SetClient gave", got)
	}
}
