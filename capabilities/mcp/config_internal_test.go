package mcp

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/policy"
)

func TestSplitCommand(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "node server.js --stdio", want: []string{"node", "server.js", "--stdio"}},
		{in: `  /opt/my\ server/bin  "two words" 'it''s' a\"b `, want: []string{"/opt/my server/bin", "two words", "its", `a"b`}},
		{in: `cmd ""`, want: []string{"cmd", ""}},
		{in: `cmd 'unterminated`, err: "unterminated"},
		{in: `cmd trailing\`, err: "unterminated"},
		{in: "   ", err: "empty command"},
	}
	for _, c := range cases {
		got, err := splitCommand(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: got %q (%v), want %q", c.in, got, err, c.want)
		}
	}
}

// TestCheckPattern: every pattern CheckPattern accepts means what
// policy.Match does with it; the rest are refused.
func TestCheckPattern(t *testing.T) {
	good := map[string][2]string{ // pattern -> a match, a non-match
		"*":                {"anything", ""},
		"docs://pages/*":   {"docs://pages/42", "docs://pagesX"},
		"docs://pages/**":  {"docs://pages/a/b", "docs://other"},
		"comment_*":        {"comment_on_page", "delete_page"},
		"comment_on_page":  {"comment_on_page", "comment_on_page2"},
		"demo://resource*": {"demo://resource/x", "demo://res"},
	}
	for p, m := range good {
		if err := CheckPattern(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
		if !policy.Match(p, m[0]) || (m[1] != "" && policy.Match(p, m[1])) {
			t.Errorf("%q does not behave as documented on %q / %q", p, m[0], m[1])
		}
	}
	for _, p := range []string{"", " ", " echo", "get_*_secret", "docs://**/pages", "a**", "*/x"} {
		if err := CheckPattern(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}
