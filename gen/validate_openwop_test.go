package gen

import (
	"errors"
	"slices"
	"testing"
)

// A route cannot be declared on a path the runtime serves itself: the
// OpenWOP discovery document or an agent under /v1/agents/.
func TestRoutesCannotShadowOpenWOP(t *testing.T) {
	for _, path := range []string{"/.well-known/openwop", "/v1/agents/local.kiln.x", "/v1/agents", "/healthz", "/readyz", "/metrics", "/.well-known/kiln", "/hook"} {
		src := `
name = "shadow"
[[start_nodes]]
name = "hook"
source = "http"
[[http_routes]]
method = "GET"
path = "` + path + `"
start_node = "hook"
auth = "none"
[[nodes]]
id = "greet"
type = "template_render"
template = "hello"
`
		wf, err := Decode("workflow.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		err = Validate(wf)
		var ve *ValidationError
		refused := errors.As(err, &ve) && slices.Contains(codesOf(ve.Issues), "invalid_route")
		if want := path != "/hook"; refused != want {
			t.Errorf("route on %s: refused %v, want %v (%v)", path, refused, want, err)
		}
	}
}
