package http

import (
	"strings"
	"testing"
)

// TestBodyNestingLimit: a JSON body nested past 64 levels is refused at
// admission with 400, naming the limit; 64 levels are accepted; a stray
// closing bracket after the body is trailing data.
func TestBodyNestingLimit(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	// (The echo of this body nests deeper than 64 and is not decoded
	// here: only the status matters.)
	res, err := ts.Client.Post(ts.URL+"/hook", "application/json",
		strings.NewReader(`{"a":`+strings.Repeat("[", 63)+strings.Repeat("]", 63)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("64 levels: status %d", res.StatusCode)
	}
	for _, body := range []string{
		`{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
		strings.Repeat("[", 1<<20-1), // near the body limit: encoding/json alone would read 10,000 levels
	} {
		r := ts.do(t, "POST", "/hook", body).expect(t, 400)
		if r.json["error"] != "bad request" || !strings.Contains(r.json["detail"].(string), "JSON nesting deeper than 64") {
			t.Errorf("%.20s...: %s", body, r.body)
		}
	}
	r := ts.do(t, "POST", "/hook", `{}}`).expect(t, 400)
	if !strings.Contains(r.body, "trailing data") {
		t.Errorf("stray }: %s", r.body)
	}
	ts.do(t, "POST", "/hook", `{"after":"a stray }"}`).expect(t, 200)
}
