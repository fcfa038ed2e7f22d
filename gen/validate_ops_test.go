package gen

import (
	"errors"
	"slices"
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
