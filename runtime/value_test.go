package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTruthy(t *testing.T) {
	falsy := []string{`null`, `false`, `""`, `0`, `0.0`, `-0`, `0e10`, `[]`, `{}`}
	truthy := []string{`true`, `"0"`, `"false"`, `1`, `-1`, `0.5`, `1e-400`, `[0]`, `{"a":null}`, `" "`}
	for _, s := range falsy {
		if Truthy(mustJSON(t, s)) {
			t.Errorf("%s should be false", s)
		}
	}
	for _, s := range truthy {
		if !Truthy(mustJSON(t, s)) {
			t.Errorf("%s should be true", s)
		}
	}
}

func TestSwitchLabel(t *testing.T) {
	cases := map[string]string{
		`"comment"`: "comment",
		`""`:        "",
		`true`:      "true",
		`false`:     "false",
		`42`:        "42",
		`1.0`:       "1.0", // integers and floats stay apart
		`1`:         "1",
		`-3.50`:     "-3.50",
		`null`:      "null",
		`[1]`:       "array",
		`{"a":1}`:   "object",
	}
	for in, want := range cases {
		if got := SwitchLabel(mustJSON(t, in)); got != want {
			t.Errorf("SwitchLabel(%s) = %q, want %q", in, got, want)
		}
	}
	// Values that came from TOML keep the same distinction.
	if got := SwitchLabel(Normalize(1.0)); got != "1.0" {
		t.Errorf("float 1.0 from TOML labelled %q", got)
	}
	if got := SwitchLabel(Normalize(int64(1))); got != "1" {
		t.Errorf("int 1 from TOML labelled %q", got)
	}
}

func TestNormalizeAndEncode(t *testing.T) {
	type s struct {
		A int `json:"a"`
	}
	v := Normalize(map[string]any{
		"i": 3, "f": 2.0, "big": uint64(math.MaxUint64), "nan": math.NaN(), "inf": math.Inf(1),
		"list": []string{"x"}, "struct": s{A: 7}, "nested": []any{int32(1), float32(0.5)},
	})
	got, err := EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"big":18446744073709551615,"f":2.0,"i":3,"inf":null,"list":["x"],"nan":null,"nested":[1,0.5],"struct":{"a":7}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if !isNormal(v) || isNormal(map[string]any{"x": 1}) {
		t.Fatal("isNormal")
	}
	// No HTML escaping; numbers keep their text.
	got, _ = EncodeJSON(mustJSON(t, `{"html":"<a&b>","n":1.50,"e":1e3}`))
	if string(got) != `{"e":1e3,"html":"<a&b>","n":1.50}` {
		t.Fatalf("encode = %s", got)
	}
	if _, err := DecodeJSON([]byte(`{} {}`)); err == nil {
		t.Fatal("trailing data must be refused")
	}
	if _, err := DecodeJSON([]byte(`{`)); err == nil {
		t.Fatal("truncated JSON must be refused")
	}
}

func TestEqual(t *testing.T) {
	eq := [][2]string{
		{`1`, `1.0`}, {`1`, `1e0`}, {`100`, `1e2`}, {`-0`, `0`},
		{`123456789012345678901234567890`, `123456789012345678901234567890.0`},
		{`{"a":[1,{"b":null}]}`, `{"a":[1.0,{"b":null}]}`},
		{`"x"`, `"x"`}, {`null`, `null`}, {`[]`, `[]`},
		{`1e99999`, `1e99999`},
	}
	ne := [][2]string{
		{`1`, `"1"`}, {`"1"`, `true`}, {`1`, `true`}, {`0`, `false`}, {`null`, `0`},
		{`123456789012345678901234567890`, `123456789012345678901234567891`},
		{`0.1`, `0.10000000000000001`},
		{`[1,2]`, `[2,1]`}, {`{"a":1}`, `{"a":1,"b":2}`}, {`{}`, `[]`},
	}
	for _, c := range eq {
		if !Equal(mustJSON(t, c[0]), mustJSON(t, c[1])) {
			t.Errorf("%s should equal %s", c[0], c[1])
		}
	}
	for _, c := range ne {
		if Equal(mustJSON(t, c[0]), mustJSON(t, c[1])) {
			t.Errorf("%s should differ from %s", c[0], c[1])
		}
	}
	if !Equal(3, json.Number("3")) {
		t.Error("Go ints compare as numbers")
	}
}

func TestLookup(t *testing.T) {
	v := mustJSON(t, `{"a":{"b":[10,{"c":"deep"}]},"0":"zero-key"}`)
	cases := []struct {
		path  string
		want  any
		found bool
	}{
		{"", v, true},
		{"a.b.1.c", "deep", true},
		{"a.b.0", json.Number("10"), true},
		{"a.b.2", nil, false},
		{"a.b.c", nil, false},
		{"a.b.0.x", nil, false},
		{"0", "zero-key", true}, // numeric segments are keys on objects
		{"a.missing", nil, false},
	}
	for _, c := range cases {
		got, found := Lookup(v, c.path)
		if found != c.found || !Equal(got, c.want) {
			t.Errorf("Lookup(%q) = %v, %v", c.path, got, found)
		}
	}
}

func TestRender(t *testing.T) {
	p, err := Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "classify", Type: "t_out"}}}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := &Run{Engine: &Engine{}, Program: p, outputs: []nodeOutput{
		{mustJSON(t, `{"label":"positive","score":0.50}`), true},
	}, trigger: MakeTrigger("manual", map[string]any{"user": "ada"})}
	input := mustJSON(t, `{"user":{"name":"Ada","age":36},"tags":["x","y"]}`)
	cases := map[string]string{
		"Hi {{user.name}}, you are {{user.age}}.": "Hi Ada, you are 36.",
		"{{ user.name }}":                         "Ada",
		"{{tags}} {{tags.1}}":                     `["x","y"] y`,
		"{{classify.label}} {{classify.score}}":   "positive 0.50", // whole-context fallback
		"{{trigger.kind}}":                        "manual",
		"{{missing.key}} stays":                   "{{missing.key}} stays",
		"{{secret:TOKEN}}":                        "{{secret:TOKEN}}",
		"no markers":                              "no markers",
		"unclosed {{user.name":                    "unclosed {{user.name",
		"{{}}":                                    "{{}}",
	}
	for tmpl, want := range cases {
		if got := Render(tmpl, input, run); got != want {
			t.Errorf("Render(%q) = %q, want %q", tmpl, got, want)
		}
	}
	// The input wins over the context when both have the path.
	if got := Render("{{user}}", mustJSON(t, `{"user":"from-input"}`), run); got != "from-input" {
		t.Errorf("input precedence: %q", got)
	}
	// Without input, paths resolve against the context only.
	if got := Render("{{user}}", nil, run); got != "{{user}}" {
		t.Errorf("nil input: %q", got)
	}
}

// TestDecodeJSONReusesDecodersFaithfully: DecodeJSON keeps decoders for
// later calls. Whatever came before (scalars that end at the input's end,
// trailing white space, errors, empty input), every call must decode as
// a decoder made for that input alone would.
func TestDecodeJSONReusesDecodersFaithfully(t *testing.T) {
	fresh := func(data []byte) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if dec.More() {
			return nil, fmt.Errorf("invalid JSON: trailing data after the value")
		}
		return v, nil
	}
	inputs := []string{
		`{"event":"ping","n":1}`, `123`, `12345678901234567890123`, `1.0`, `"s"`, `true`, `null`,
		"{\"a\":[1,2,{\"b\":null}]}  \n\t ", `  [1]`, `{"a":`, `{"a":1} x`, `{"a":1}{"b":2}`, ``, `   `,
		`[`, `}`, `-`, `1e400`, `"\u00e9\ud83d\ude00"`, `{"a":1}` + "\n",
	}
	for round := 0; round < 3; round++ {
		for i := range inputs {
			for _, in := range []string{inputs[i], inputs[(i*7+round)%len(inputs)]} {
				got, gotErr := DecodeJSON([]byte(in))
				want, wantErr := fresh([]byte(in))
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
					t.Fatalf("DecodeJSON(%q) = %#v, %v; a fresh decoder gives %#v, %v", in, got, gotErr, want, wantErr)
				}
			}
		}
	}
}
