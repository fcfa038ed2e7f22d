package http

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// httpredact_node replies with trigger.echo: as JSON ({"echo": ..., "n":
// 1}) when its key is "json", as text otherwise. Nothing in it redacts:
// that is the server's part.
func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "httpredact_node", Family: "httptest",
		Prepare: func(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				echo, _ := c.Run.Trigger()["echo"].(string)
				if c.Node.Key == "json" {
					body, err := runtime.EncodeJSON(map[string]any{"echo": echo, "n": 1})
					if err != nil {
						return runtime.Result{}, err
					}
					return runtime.Result{Value: map[string]any{"echo": echo},
						Respond: &runtime.HTTPResponse{Status: 200, ContentType: "application/json", Body: string(body)}}, nil
				}
				return runtime.Result{Value: map[string]any{"echo": echo},
					Respond: &runtime.HTTPResponse{Status: 200, ContentType: "text/plain", Body: "echo: " + echo}}, nil
			}, nil
		}})
}

func redactWF(mode string) string {
	return strings.Replace(wf(mode, `idempotency_key = "trigger.id"
idempotency_ttl_secs = 3600`), `type = "httptest_node"`, `type = "httpredact_node"`, 1)
}

// storedBody is the reply recorded on disk for the only keyed request.
func storedBody(t *testing.T, ts *testServer) string {
	t.Helper()
	files := idemFiles(t, ts)
	if len(files) != 1 {
		t.Fatalf("%d idempotency files, want 1", len(files))
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var e idemEntry
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return string(e.Body)
}

// TestRouteReplyRedacted: a respond node echoing a registered secret
// replies [REDACTED], JSON replies stay valid JSON, and the reply stored
// for idempotent replays holds no secret either (the redaction before the
// store). A reply recorded before its secret was registered is redacted
// when it is replayed (the redaction in write).
func TestRouteReplyRedacted(t *testing.T) {
	const secret = `route-reply-s3cret-"quoted"-4b1d`
	runtime.RedactValue(secret)
	echo, _ := json.Marshal(map[string]any{"id": "k1", "echo": "tok " + secret})

	for _, mode := range []string{"json", "text"} {
		t.Run(mode, func(t *testing.T) {
			ts := start(t, redactWF(mode), setup{})
			first := ts.do(t, "POST", "/hook", string(echo)).expect(t, 200)
			replay := ts.do(t, "POST", "/hook", string(echo)).expect(t, 200)
			if replay.header.Get("X-Idempotent-Replay") != "true" {
				t.Fatal("second delivery was not a replay")
			}
			stored := storedBody(t, ts)
			for what, text := range map[string]string{"reply": first.body, "replay": replay.body, "stored reply": stored} {
				if strings.Contains(text, secret) || strings.Contains(text, "route-reply-s3cret") || !strings.Contains(text, "tok "+runtime.RedactedMarker) {
					t.Fatalf("%s not redacted: %s", what, text)
				}
			}
			if mode == "json" {
				if first.body != `{"echo":"tok [REDACTED]","n":1}` || !json.Valid([]byte(stored)) {
					t.Fatalf("JSON reply %s, stored %s", first.body, stored)
				}
			} else if first.body != "echo: tok [REDACTED]" {
				t.Fatalf("text reply %q", first.body)
			}
		})
	}

	t.Run("registered after it was recorded", func(t *testing.T) {
		// Fresh per run: a value once registered stays a secret for the
		// process (go test -count=N).
		late := "late-registered-value-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		ts := start(t, redactWF("json"), setup{})
		body := `{"id":"k2","echo":"` + late + `"}`
		if r := ts.do(t, "POST", "/hook", body).expect(t, 200); !strings.Contains(r.body, late) {
			t.Fatalf("not a secret yet, yet redacted: %s", r.body)
		}
		runtime.RedactValue(late)
		r := ts.do(t, "POST", "/hook", body).expect(t, 200)
		if r.header.Get("X-Idempotent-Replay") != "true" || r.body != `{"echo":"[REDACTED]","n":1}` {
			t.Fatalf("replay %v %s", r.header, r.body)
		}
	})
}
