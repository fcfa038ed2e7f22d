package gen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

const routeHead = `name = "rl"
[[start_nodes]]
name = "main"
entry_node = "end"
[[nodes]]
id = "end"
type = "terminate"
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
`

// An older spelling of rate limiting (docs/serve.md) writes the bucket
// as an array of tables; kiln reads it as the one table it means.
func TestRateLimitArraySpelling(t *testing.T) {
	for name, src := range map[string]string{
		"table": routeHead + "[http_routes.rate_limit]\ncapacity = 10\nper_second = 1.5\n",
		"array": routeHead + "[[http_routes.rate_limit]]\ncapacity = 10 # burst size\nper_second = 1.5\n",
		"wrapped": "[[workflows]]\n" + strings.ReplaceAll(strings.ReplaceAll(routeHead, "[[", "[[workflows."), "[[workflows.http_routes]]", "[[workflows.http_routes]]") +
			"[[workflows.http_routes.rate_limit]]\ncapacity = 10\nper_second = 1.5\n",
	} {
		t.Run(name, func(t *testing.T) {
			wf, err := gen.Decode("wf.toml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if len(wf.HTTPRoutes) != 1 || wf.HTTPRoutes[0].RateLimit == nil {
				t.Fatalf("routes = %+v", wf.HTTPRoutes)
			}
			if rl := wf.HTTPRoutes[0].RateLimit; rl.Capacity != 10 || rl.PerSecond != 1.5 {
				t.Fatalf("rate limit = %+v", rl)
			}
			if wf.Name != "rl" || len(wf.Nodes) != 1 {
				t.Fatalf("workflow = %+v", wf)
			}
		})
	}
}

func TestRateLimitArraySpellingErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		src  string
		line int
		msg  string
	}{
		"two buckets": {routeHead + "[[http_routes.rate_limit]]\ncapacity = 10\n[[http_routes.rate_limit]]\ncapacity = 5\n",
			14, "a route has one rate limit"},
		"unknown key inside": {routeHead + "[[http_routes.rate_limit]]\ncapacity = 10\nburst = 3\n",
			14, "burst"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := gen.Decode("wf.toml", []byte(tc.src))
			var pe *gen.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a ParseError", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Error(), tc.msg) || !strings.Contains(pe.Error(), "rate_limit") {
				t.Fatalf("err = %v (line %d), want line %d mentioning %q", pe, pe.Line, tc.line, tc.msg)
			}
		})
	}
}
