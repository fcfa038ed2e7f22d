package http

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
)

// TestLoadedWorkflow serves testdata/http/orders through the real loader:
// the input schema comes from the assets gen.Load read next to the file.
func TestLoadedWorkflow(t *testing.T) {
	t.Setenv("SHOP_WEBHOOK_SECRET", "shop-secret-9")
	wf, err := gen.Load("../../testdata/http/orders/workflow.toml", gen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	h := &runtime.Host{Program: p, Engine: &runtime.Engine{StateDir: t.TempDir(), Audit: newTestAudit(buf)}}
	s, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, false)
	post := func(body string) resp {
		stamp := strconv.FormatInt(time.Now().Unix(), 10)
		return ts.do(t, "POST", "/orders", body, "Content-Type", "application/json",
			"X-Shop-Timestamp", stamp, "X-Shop-Signature", "sha256="+sign("shop-secret-9", stamp+"."+body))
	}
	r := post(`{"order":{"id":"o-1","status":"new","total":9.5}}`).expect(t, 201)
	if r.body != `{"accepted":"o-1","by":"shop"}` {
		t.Fatalf("reply %s", r.body)
	}
	if post(`{"order":{"id":"o-1","status":"new","total":9.5}}`).expect(t, 201).header.Get("X-Idempotent-Replay") != "true" {
		t.Fatal("redelivery not replayed")
	}
	r = post(`{"order":{"id":"o-2","status":"lost"}}`).expect(t, 400)
	if !strings.Contains(r.body, "/order/status") {
		t.Fatalf("schema error: %s", r.body)
	}
	post(`{"order":{"id":"o-3","status":"cancelled"}}`).expect(t, 422)
	ts.do(t, "POST", "/orders", `{"order":{"id":"o-4","status":"new"}}`).expect(t, 401)
}
