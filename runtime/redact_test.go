package runtime

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// isolateSecrets gives the test a registry of its own (short secrets
// included), so that the values it registers do not redact the output of
// other tests; the previous registry is back when the test ends.
func isolateSecrets(t *testing.T) {
	t.Helper()
	redactMu.Lock()
	oldSet, oldSecrets := redactor.Load(), redactSecrets
	redactSecrets = map[string]bool{}
	redactor.Store(nil)
	redactMu.Unlock()
	short.mu.Lock()
	oldReport, oldPending, oldNames := short.report, short.pending, short.names
	short.report, short.pending, short.names = nil, nil, nil
	short.mu.Unlock()
	t.Cleanup(func() {
		redactMu.Lock()
		redactSecrets = oldSecrets
		redactor.Store(oldSet)
		redactMu.Unlock()
		short.mu.Lock()
		short.report, short.pending, short.names = oldReport, oldPending, oldNames
		short.mu.Unlock()
	})
}

func fmtScalar(v any) string {
	b, _ := EncodeJSON(v)
	return string(b)
}

// jsonShape is what RedactJSON must keep of a JSON text: every object key
// (by path) and every number, boolean and null, in document order.
func jsonShape(t *testing.T, b []byte) (keys, scalars []string, strs []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range SortedKeys(x) {
				keys = append(keys, path+"/"+k)
				walk(path+"/"+k, x[k])
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		case string:
			strs = append(strs, x)
		default:
			scalars = append(scalars, path+"="+fmtScalar(x))
		}
	}
	walk("", v)
	return keys, scalars, strs
}

func TestRedactJSON(t *testing.T) {
	cases := []struct {
		name    string
		secrets []string
		in      string
		want    string // "" = only the invariants are checked
	}{
		{"whole value", []string{"abc-s3cret"}, `{"token":"abc-s3cret"}`, `{"token":"[REDACTED]"}`},
		{"substring", []string{"abc-s3cret"}, `{"m":"x abc-s3cret y"}`, `{"m":"x [REDACTED] y"}`},
		{"quote and backslash", []string{`p"q\w`}, `{"a":"<p\"q\\w>"}`, `{"a":"<[REDACTED]>"}`},
		{"html escapes", []string{"<b>&"}, `{"a":"\u003cb\u003e\u0026!"}`, `{"a":"[REDACTED]!"}`},
		{"unicode escaped", []string{"pässwörd"}, `{"a":"my p\u00e4ssw\u00f6rd"}`, `{"a":"my [REDACTED]"}`},
		{"unicode raw", []string{"日本語"}, `["日本語です"]`, `["[REDACTED]です"]`},
		{"spans an escaped newline", []string{"a\nb"}, `{"a":"xa\nby"}`, `{"a":"x[REDACTED]y"}`},
		{"control character", []string{"\x01z"}, `{"a":"\u0001z"}`, `{"a":"[REDACTED]"}`},
		{"key equal to the secret", []string{"sek"}, `{"sek":"sek","o":{"sek":1}}`, `{"sek":"[REDACTED]","o":{"sek":1}}`},
		{"key only", []string{"sek"}, `{"sek":{"sek":null}}`, `{"sek":{"sek":null}}`},
		{"numbers equal to the secret", []string{"1"}, `{"wall_ms": 12, "n": [1, 1.5, "1", -1e1], "s1": "a1"}`,
			`{"wall_ms": 12, "n": [1, 1.5, "[REDACTED]", -1e1], "s1": "a[REDACTED]"}`},
		{"literals equal to the secret", []string{"true", "null"}, `{"t":true,"n":null,"s":"true null"}`,
			`{"t":true,"n":null,"s":"[REDACTED] [REDACTED]"}`},
		{"nested arrays", []string{"s3c"}, `[[["s3c",["x s3c"]]],{"k":[{"s3c":"s3c"},[]]},"s3c"]`,
			`[[["[REDACTED]",["x [REDACTED]"]]],{"k":[{"s3c":"[REDACTED]"},[]]},"[REDACTED]"]`},
		{"layout kept", []string{"tok"}, "{\n  \"a\": \"tok\",\n  \"b\": [\n    1\n  ]\n}", "{\n  \"a\": \"[REDACTED]\",\n  \"b\": [\n    1\n  ]\n}"},
		{"top-level string", []string{"tok"}, `"tok"`, `"[REDACTED]"`},
		{"marker-like secret", []string{"ED]"}, `{"a":"ED]ED]"}`, `{"a":"[REDACTED][REDACTED]"}`},
		{"empty containers", []string{"x"}, `{"a":{},"b":[],"c":"x"}`, `{"a":{},"b":[],"c":"[REDACTED]"}`},
		{"escaped key holding the secret", []string{"k\"y"}, `{"k\"y":"k\"y"}`, `{"k\"y":"[REDACTED]"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolateSecrets(t)
			for _, s := range c.secrets {
				RedactValue(s)
			}
			in := []byte(c.in)
			got := RedactJSON(in)
			if string(in) != c.in {
				t.Fatal("input modified")
			}
			if !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
			if c.want != "" && string(got) != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			ik, is, _ := jsonShape(t, in)
			gk, gs, strs := jsonShape(t, got)
			if strings.Join(ik, ",") != strings.Join(gk, ",") || strings.Join(is, ",") != strings.Join(gs, ",") {
				t.Fatalf("keys or scalars changed:\n%v %v\n%v %v", ik, is, gk, gs)
			}
			for _, s := range strs {
				for _, part := range strings.Split(s, RedactedMarker) {
					for _, sec := range c.secrets {
						if strings.Contains(part, sec) {
							t.Fatalf("string %q still holds %q", s, sec)
						}
					}
				}
			}
		})
	}
}

func TestRedactJSONEdges(t *testing.T) {
	isolateSecrets(t)
	clean := []byte(`{"ok":"fine"}`)
	if got := RedactJSON(clean); &got[0] != &clean[0] {
		t.Fatal("JSON without a secret was copied")
	}
	RedactValue("zz-secret-9")
	if got := RedactJSON(clean); &got[0] != &clean[0] {
		t.Fatal("JSON without a secret was copied")
	}
	// Not JSON: redacted as plain text rather than let through.
	if got := string(RedactJSON([]byte(`{"a": zz-secret-9`))); got != `{"a": [REDACTED]` {
		t.Fatalf("invalid JSON: %s", got)
	}
	if got := string(RedactJSON([]byte(`not json zz-secret-9`))); got != `not json [REDACTED]` {
		t.Fatalf("text: %s", got)
	}
	// Invalid UTF-8 takes the decoding path and still comes out valid.
	if got := RedactJSON([]byte("{\"a\":\"zz-secret-9\xff\"}")); !json.Valid(got) || bytes.Contains(got, []byte("zz-secret-9")) {
		t.Fatalf("invalid UTF-8: %q", got)
	}
	// Plain text redaction, for comparison: it would break the number.
	RedactValue("7")
	if got := string(RedactJSON([]byte(`{"n":7,"s":"7"}`))); got != `{"n":7,"s":"[REDACTED]"}` {
		t.Fatalf("got %s", got)
	}
}

// TestCanonicalJSON: the fast path of RedactJSON accepts exactly the
// escapes EncodeJSON writes; any other spelling of a character is decoded.
func TestCanonicalJSON(t *testing.T) {
	runes := []rune{0x2028, 0x2029, 0xe9, 0xfffd, 0x1f600}
	for r := rune(0); r < 0x80; r++ {
		runes = append(runes, r)
	}
	for _, r := range runes {
		enc, err := EncodeJSON(map[string]string{"k": "a" + string(r) + "b"})
		if err != nil {
			t.Fatal(err)
		}
		if !canonicalJSON(enc) {
			t.Errorf("EncodeJSON's %s not accepted as canonical", enc)
		}
	}
	for _, text := range []string{`"\u0061"`, `"\/"`, `"\u000A"`, `"\u000a"`, `"\u0009"`, `"\u003c"`, `"\u00e9"`,
		`"\uD83D\uDE00"`, "\"\xff\"", "\"\u2028\"", `"\`, `"\u00"`} {
		if canonicalJSON([]byte(text)) {
			t.Errorf("%q accepted as canonical", text)
		}
	}
}

func TestRedactBody(t *testing.T) {
	isolateSecrets(t)
	RedactValue("1")
	body := []byte(`{"n":1,"s":"1"}`)
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/Problem+JSON"} {
		if got := string(RedactBody(ct, body)); got != `{"n":1,"s":"[REDACTED]"}` {
			t.Fatalf("%s: %s", ct, got)
		}
	}
	if got := string(RedactBody("text/plain", body)); got != `{"n":[REDACTED],"s":"[REDACTED]"}` {
		t.Fatalf("text/plain: %s", got)
	}
}

func TestRedactTreeCopiesNeverMutates(t *testing.T) {
	isolateSecrets(t)
	RedactValue("up")
	inner := map[string]any{"state": "up", "n": json.Number("1")}
	list := []any{"up", "down", inner}
	v := map[string]any{"up": list, "other": map[string]any{"x": "down"}}
	got := RedactTree(v).(map[string]any)
	if inner["state"] != "up" || list[0] != "up" || v["up"].([]any)[0] != "up" {
		t.Fatal("input modified")
	}
	gl := got["up"].([]any)
	if gl[0] != RedactedMarker || gl[1] != "down" || gl[2].(map[string]any)["state"] != RedactedMarker || gl[2].(map[string]any)["n"] != json.Number("1") {
		t.Fatalf("got %v", got)
	}
	// Unchanged subtrees are shared, not copied.
	got["other"].(map[string]any)["probe"] = true
	if v["other"].(map[string]any)["probe"] != true {
		t.Fatal("unchanged subtree was copied")
	}
	clean := map[string]any{"a": "b"}
	if got := RedactTree(clean).(map[string]any); got["a"] != "b" {
		t.Fatal("clean changed")
	}
	// Values that are not of the JSON model go through their JSON form.
	typed := RedactTree(map[string]any{"list": []string{"up", "x"}}).(map[string]any)
	if l, ok := typed["list"].([]any); !ok || l[0] != RedactedMarker || l[1] != "x" {
		t.Fatalf("typed: %#v", typed)
	}
}

// TestShortSecretWarnedOnceByName: a secret under 8 characters is reported
// once, under its name when one is known, never with its value; those
// registered before a reporter is installed are reported when it is.
func TestShortSecretWarnedOnceByName(t *testing.T) {
	isolateSecrets(t)
	var got []string
	report := func(name string) { got = append(got, name) }
	RedactValue("sh0rt")                  // no name yet
	RedactSecret("STATUS_TOKEN", "sh0rt") // the same value, now named
	RedactSecret("LONG_ENOUGH", "12345678")
	RedactValue("anon")
	if len(got) != 0 {
		t.Fatal("reported before a reporter was installed")
	}
	WarnShortSecrets(report)
	defer WarnShortSecrets(nil)
	if strings.Join(got, ",") != "STATUS_TOKEN," {
		t.Fatalf("reported %q", got)
	}
	RedactSecret("STATUS_TOKEN", "sh0rt")
	RedactValue("anon")
	RedactSecret("OTHER", "xy")
	RedactSecret("OTHER", "xy")
	if strings.Join(got, ",") != "STATUS_TOKEN,,OTHER" {
		t.Fatalf("reported %q", got)
	}
	if w := ShortSecretWarning("STATUS_TOKEN"); w != "secret STATUS_TOKEN is shorter than 8 characters; redaction of short values can hide unrelated output" {
		t.Fatalf("warning %q", w)
	}
	if w := ShortSecretWarning(""); strings.Contains(w, "sh0rt") || !strings.HasPrefix(w, "a secret value is shorter") {
		t.Fatalf("warning %q", w)
	}
	// Characters, not bytes: seven characters in more than eight bytes.
	got = nil
	RedactSecret("UNICODE", "ééééééé")
	if strings.Join(got, ",") != "UNICODE" {
		t.Fatalf("reported %q", got)
	}
}

// BenchmarkRedactJSON: a run record of about 4 KiB with two registered
// secrets, clean (the fast path every reply takes) and holding one of
// them (the decoding path), beside RedactBytes on the same text.
func BenchmarkRedactJSON(b *testing.B) {
	isolateSecrets(&testing.T{})
	RedactValue("bench-secret-value-1")
	RedactValue(`bench-"quoted"-2`)
	entries := make([]any, 40)
	for i := range entries {
		entries[i] = map[string]any{"node_id": "node", "kind": "http_request", "outcome": "continue",
			"output": map[string]any{"status": 200, "body": "{\"state\":\"up\",\"n\":17}", "bytes": 21}}
	}
	clean, _ := EncodeJSONIndent(map[string]any{"workflow": "bench", "wall_ms": 12, "trace": entries})
	dirty := bytes.Replace(clean, []byte(`\"up\"`), []byte(`\"bench-secret-value-1\"`), 1)
	for _, c := range []struct {
		name string
		in   []byte
		f    func([]byte) []byte
	}{
		{"clean/RedactJSON", clean, RedactJSON}, {"clean/RedactBytes", clean, RedactBytes},
		{"secret/RedactJSON", dirty, RedactJSON}, {"secret/RedactBytes", dirty, RedactBytes},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				c.f(c.in)
			}
		})
	}
}
