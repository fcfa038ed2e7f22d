package mcp_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
)

func TestDebugTmp(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	s1 := newTestServer(rec)
	sw := &switchHandler{h: statefulHTTP(s1)}
	ts := httptest.NewServer(sw)
	defer ts.Close()
	p := kmcp.NewPool([]kmcp.Server{{Name: "docs", URL: ts.URL + "/mcp", AllowResources: []string{"*"}}}, kmcp.Options{})
	defer p.Close()
	ch, stop, _ := p.Watch("docs")
	defer stop()
	ctx := ctxT(t)
	if err := p.Subscribe(ctx, "docs", "test://docs/a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	s1.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
	select {
	case n := <-ch:
		t.Logf("got %+v", n)
	case <-time.After(time.Second):
		t.Logf("nothing from s1")
	}
	s2 := newTestServer(rec)
	sw.set(statefulHTTP(s2))
	t.Log("ping", p.Ping(ctx, "docs"))
	for i := 0; i < 10; i++ {
		time.Sleep(200 * time.Millisecond)
		s2.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
		select {
		case n := <-ch:
			t.Logf("got %+v", n)
		case <-time.After(200 * time.Millisecond):
			t.Logf("nothing from s2")
		}
	}
}
