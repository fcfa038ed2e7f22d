package intel_test

import (
	"context"
	"testing"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/runtime"
)

type echo struct{}

func (echo) Complete(_ context.Context, req *intel.Request) (*intel.Response, error) {
	return &intel.Response{Content: req.Model}, nil
}

func TestClientFrom(t *testing.T) {
	if intel.ClientFrom(nil) != nil || intel.ClientFrom(&runtime.Services{}) != nil {
		t.Fatal("services without backends returned some")
	}
	svc := &runtime.Services{}
	intel.SetClient(svc, func(string) (intel.Client, error) { return echo{}, nil })
	backends := intel.ClientFrom(svc)
	if backends == nil {
		t.Fatal("SetClient's backends are not found")
	}
	c, err := backends("default")
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Complete(context.Background(), &intel.Request{Model: "m"}); err != nil || resp.Content != "m" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
}
