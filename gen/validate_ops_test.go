package gen

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestOpsBindValidated: [server] ops_bind must be HOST:PORT, and the key
// is known to the strict decoder.
func TestOpsBindValidated(t *testing.T) {
	for bind, ok := range map[string]bool{
		"127.0.0.1:9090": true, "[::1]:9090": true, ":9090": true, "localhost:0": true,
		"127.0.0.1": false, "9090": false, "127.0.0.1:": false, "http://127.0.0.1:9090": false,
	} {
		src := `
name = "beat"
[server]
ops_bind = "` + bind + `"
[[start_nodes]]
name = "heartbeat"
source = "event"
[[triggers]]
type = "interval"
every = "1m"
start_node = "heartbeat"
[[nodes]]
id = "render"
type = "template_render"
template = "tick"
`
		wf, err := Decode("workflow.toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", bind, err)
		}
		err = Validate(wf)
		var ve *ValidationError
		refused := errors.As(err, &ve) && slices.Contains(codesOf(ve.Issues), "invalid_ops_bind")
		if refused == ok {
			t.Errorf("ops_bind %q: refused %v (%v)", bind, refused, err)
		}
		if ok && err != nil {
			t.Errorf("ops_bind %q: %v", bind, err)
		}
	}
}

// TestNodeEventsIsABool: [logging] node_events is known to the strict
// decoder and must be a boolean, refused with file, line and key.
func TestNodeEventsIsABool(t *testing.T) {
	const base = "name = \"w\"\n[logging]\nnode_events = %s\n[[start_nodes]]\nname = \"s\"\n[[nodes]]\nid = \"n\"\ntype = \"template_render\"\ntemplate = \"x\"\n"
	wf, err := Decode("workflow.toml", []byte(fmt.Sprintf(base, "false")))
	if err != nil || wf.Logging == nil || wf.Logging.NodeEvents == nil || *wf.Logging.NodeEvents {
		t.Fatalf("node_events = false: %v", err)
	}
	_, err = Decode("workflow.toml", []byte(fmt.Sprintf(base, `"yes"`)))
	if err == nil || !strings.Contains(err.Error(), "workflow.toml:3") || !strings.Contains(err.Error(), "node_events") {
		t.Fatalf("node_events = \"yes\": %v", err)
	}
}

// TestRouteHeadersValidated: kiln check refuses a route listing a
// credential header (invalid_route_headers) and accepts plain ones.
func TestRouteHeadersValidated(t *testing.T) {
	for list, ok := range map[string]bool{`["X-GitHub-Event"]`: true, `["Authorization"]`: false, `["a b"]`: false} {
		src := `
name = "hooks"
[[start_nodes]]
name = "hook"
source = "http"
entry_node = "n"
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "hook"
auth = "none"
headers = ` + list + `
[[nodes]]
id = "n"
type = "template_render"
template = "x"
`
		wf, err := Decode("workflow.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		err = Validate(wf)
		var ve *ValidationError
		refused := errors.As(err, &ve) && slices.Contains(codesOf(ve.Issues), "invalid_route_headers")
		if refused == ok {
			t.Errorf("headers = %s: refused %v (%v)", list, refused, err)
		}
	}
}
