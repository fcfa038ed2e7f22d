package llm_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/capabilities/llm"
	"github.com/kilnworks/kiln/runtime"
)

// TestMissingAPIKeyIsNotRetried: a named backend whose API key is not set
// is a configuration error (class config), so `on = "transient"` does not
// retry it and nothing reaches the provider. Before, it was reported as an
// intelligence error and retried max_attempts times with backoff.
func TestMissingAPIKeyIsNotRetried(t *testing.T) {
	var hits atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer api.Close()
	p := compile(t, `
name = "nokey"
[[intelligence.backends]]
name = "claude"
provider = "anthropic"
model = "m"
api_key_env = "KILN_TEST_UNSET_KEY_4711"
base_url = "`+api.URL+`"
[[nodes]]
id = "ask"
type = "llm_infer"
backend = "claude"
prompt = "q"
[nodes.retry]
max_attempts = 3
backoff_ms = 1
on = "transient"
`, nil)
	audit := &syncBuf{}
	e := &runtime.Engine{Audit: slog.New(slog.NewJSONHandler(audit, nil)), Services: &runtime.Services{
		Secret: func(name string) (string, error) { return "", errors.New("no secret " + name) }}}
	if err := llm.SetupForTest(&runtime.Host{Engine: e, Program: p}, "", "", "", nil); err != nil {
		t.Fatal(err)
	}
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusErrored, "node ask (llm_infer)", "KILN_TEST_UNSET_KEY_4711 is not set")
	if r.Outcome.Err.Class != runtime.ClassConfig {
		t.Fatalf("class = %s, want config", r.Outcome.Err.Class)
	}
	if n := r.Counters.NodeExecutions.Load(); n != 1 || strings.Contains(audit.String(), "node.retry") || hits.Load() != 0 {
		t.Fatalf("%d executions, %d requests; audit:\n%s", n, hits.Load(), audit)
	}
}
