package rules

import (
	"regexp"
	"slices"
	"testing"
)

// The expressions the hand-written matchers replace: they must agree on
// every input.
var (
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	secretRefRE  = regexp.MustCompile(`\{\{\s*secret:([A-Za-z0-9_.-]+)\s*\}\}`)
)

// splitWithRE is SplitHeaderValue as it was written with secretRefRE.
func splitWithRE(val string) []HeaderPart {
	var parts []HeaderPart
	rest := val
	for {
		loc := secretRefRE.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		if loc[0] > 0 {
			parts = append(parts, HeaderPart{Text: rest[:loc[0]]})
		}
		parts = append(parts, HeaderPart{Secret: rest[loc[2]:loc[3]]})
		rest = rest[loc[1]:]
	}
	if rest != "" {
		parts = append(parts, HeaderPart{Text: rest})
	}
	return parts
}

var headerValues = []string{
	"", "plain", "{{secret:TOKEN}}", "Bearer {{secret:TOKEN}}", "{{ secret:a.b-c_d }}",
	"{{\tsecret:x\n}}", "{{\vsecret:x}}", "{{secret:}}", "{{secret:a b}}", "{{{secret:x}}}",
	"{{secret:x}", "{secret:x}}", "{{Secret:x}}", "{{secret:x}}{{secret:y}}", "a{{secret:x}}b{{secret:y}}c",
	"{{secret:x}}}}", "{{{{secret:x}}", "{{ {{secret:x}} }}", "{{secret:é}}", "{{secret:x}}é",
	"{{secret:x\u00a0}}", "{{ secret :x}}", "{{", "}}", "{{}}", "{{secret:x}}{{",
}

func TestIsHeaderNameMatchesRegexp(t *testing.T) {
	for _, s := range []string{"", "X-Token", "x_y", "a.b", "!#$%&'*+-.^_`|~09azAZ", "a b", "a:b", "é", "a\n",
		"a\x00", "(x)", "a/b", "a@b", "[x]", "{x}", "a\"b", "a,b", "a;b", "a=b", "a?b", "a\\b"} {
		if got, want := IsHeaderName(s), headerNameRE.MatchString(s); got != want {
			t.Errorf("IsHeaderName(%q) = %v, the expression says %v", s, got, want)
		}
	}
}

func TestSplitHeaderValueMatchesRegexp(t *testing.T) {
	for _, v := range headerValues {
		if got, want := SplitHeaderValue(v), splitWithRE(v); !slices.Equal(got, want) {
			t.Errorf("SplitHeaderValue(%q) = %q, the expression gives %q", v, got, want)
		}
	}
}

func FuzzHeaderMatchers(f *testing.F) {
	for _, v := range headerValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if got, want := IsHeaderName(v), headerNameRE.MatchString(v); got != want {
			t.Errorf("IsHeaderName(%q) = %v, the expression says %v", v, got, want)
		}
		if got, want := SplitHeaderValue(v), splitWithRE(v); !slices.Equal(got, want) {
			t.Errorf("SplitHeaderValue(%q) = %q, the expression gives %q", v, got, want)
		}
	})
}
