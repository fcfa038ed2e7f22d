package http

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"

	// The schema family serves runtime.CompileSchema for input_schema;
	// a sealed binary links it only when a route declares one.
	_ "github.com/kilnworks/kiln/capabilities/schema"
)

func TestFormBodies(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	const form = "application/x-www-form-urlencoded"
	r := ts.do(t, "POST", "/hook", "From=%2B15551234&Body=hello+world&Body=last+wins&Empty=&Flag", "Content-Type", form).expect(t, 200)
	trig := r.at("final_value.trigger").(map[string]any)
	want := map[string]string{"From": "+15551234", "Body": "last wins", "Empty": "", "Flag": ""}
	for k, v := range want {
		if trig[k] != v {
			t.Errorf("%s = %#v, want %q (%s)", k, trig[k], v, r.body)
		}
	}
	// Charset parameters are fine; the body decides.
	ts.do(t, "POST", "/hook", "a=1", "Content-Type", form+"; charset=utf-8").expect(t, 200)
	for name, body := range map[string]string{
		"bad escape":       "a=%zz",
		"truncated escape": "a=%4",
		"bad name escape":  "%g1=x",
		"non-UTF-8":        "a=%ff%fe",
		"semicolon":        "a=1;b=2",
	} {
		r := ts.do(t, "POST", "/hook", body, "Content-Type", form).expect(t, 400)
		if r.json["error"] != "bad request" || !strings.Contains(r.json["detail"].(string), "form body") {
			t.Errorf("%s: %s", name, r.body)
		}
	}
}

func TestMultipartBodies(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("subject", "Quarterly report")
	_ = mw.WriteField("note", "first")
	_ = mw.WriteField("note", "second")
	fw, _ := mw.CreateFormFile("attachment", "report.pdf")
	_, _ = fw.Write([]byte("%PDF-1.7 binary \x00\x01"))
	_ = mw.Close()
	r := ts.do(t, "POST", "/hook", buf.String(), "Content-Type", mw.FormDataContentType()).expect(t, 200)
	trig := r.at("final_value.trigger").(map[string]any)
	if trig["subject"] != "Quarterly report" || trig["note"] != "second" {
		t.Fatalf("fields: %s", r.body)
	}
	if _, ok := trig["attachment"]; ok || strings.Contains(r.body, "PDF") {
		t.Fatalf("file part leaked into the payload: %s", r.body)
	}
	if a := ts.Audit.String(); !strings.Contains(a, `"msg":"http.multipart_file_dropped"`) || !strings.Contains(a, `"field":"attachment"`) {
		t.Fatalf("no drop audit:\n%s", a)
	}

	// Binary text field, missing boundary, truncated body.
	buf.Reset()
	mw = multipart.NewWriter(&buf)
	_ = mw.WriteField("bad", "\xff\xfe")
	_ = mw.Close()
	ts.do(t, "POST", "/hook", buf.String(), "Content-Type", mw.FormDataContentType()).expect(t, 400)
	ts.do(t, "POST", "/hook", "x", "Content-Type", "multipart/form-data").expect(t, 400)
	ts.do(t, "POST", "/hook", "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nunterminated",
		"Content-Type", "multipart/form-data; boundary=b").expect(t, 400)
}

func TestJSONBodiesAndContentTypes(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	ts.do(t, "POST", "/hook", `{"ok":true}`, "Content-Type", "application/json; charset=utf-8").expect(t, 200)
	// Legacy contract: any other type must still be JSON.
	ts.do(t, "POST", "/hook", `{"ok":true}`, "Content-Type", "text/plain").expect(t, 200)
	for name, c := range map[string][2]string{
		"invalid JSON":     {`{"ok":`, "application/json"},
		"trailing data":    {`{} {}`, "application/json"},
		"xml":              {`<ok/>`, "text/xml"},
		"malformed type":   {`{}`, "application/json; =broken"},
		"bare words":       {`hello`, ""},
		"json with binary": {"\"\xff\"", "application/json"},
	} {
		r := ts.do(t, "POST", "/hook", c[0], "Content-Type", c[1]).expect(t, 400)
		if r.json["error"] != "bad request" || r.json["detail"] == "" {
			t.Errorf("%s: %s", name, r.body)
		}
	}
	r := ts.do(t, "POST", "/hook", `<ok/>`, "Content-Type", "text/xml").expect(t, 400)
	if !strings.Contains(r.body, "text/xml") {
		t.Errorf("detail should name the content type: %s", r.body)
	}
}

const orderSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["order", "amount"],
  "properties": {
    "order": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    "amount": {"type": "number", "minimum": 0},
    "currency": {"enum": ["EUR", "USD"]}
  }
}`

func TestInputSchema(t *testing.T) {
	ts := start(t, wf("echo", `input_schema = "schemas/order.json"`),
		setup{assets: map[string][]byte{"schemas/order.json": []byte(orderSchema)}})
	ts.do(t, "POST", "/hook", `{"order":{"id":"A1"},"amount":12.50,"currency":"EUR"}`).expect(t, 200)
	r := ts.do(t, "POST", "/hook", `{"order":{"id":5},"amount":-1,"currency":"GBP"}`).expect(t, 400)
	if r.json["error"] != "input does not match input_schema" {
		t.Fatalf("body %s", r.body)
	}
	details, _ := r.json["details"].([]any)
	if len(details) != 3 {
		t.Fatalf("want 3 errors, got %s", r.body)
	}
	for i, want := range []string{"/amount:", "/currency:", "/order/id:"} {
		if !strings.HasPrefix(details[i].(string), want) {
			t.Fatalf("error %d = %q, want prefix %q (sorted)", i, details[i], want)
		}
	}
	r = ts.do(t, "POST", "/hook", ``).expect(t, 400) // null is not an object
	if !strings.Contains(r.body, "/: expected object") {
		t.Fatalf("null body: %s", r.body)
	}
}

func TestInputSchemaRemoteRefRefused(t *testing.T) {
	for _, ref := range []string{"http://127.0.0.1:1/x.json", "file:///etc/passwd", "other.json"} {
		schema := `{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`
		h := newHost(t, wf("echo", `input_schema = "s.json"`), setup{assets: map[string][]byte{"s.json": []byte(schema)}})
		_, err := New(h, Config{})
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("$ref %s: err = %v", ref, err)
		}
	}
}
