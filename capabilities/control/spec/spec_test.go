package spec

import (
	"mime"
	"strings"
	"testing"
)

// TestMediaTypeAgreesWithMime: MediaType accepts exactly what
// mime.ParseMediaType accepts (minus line breaks, which a header refuses).
func TestMediaTypeAgreesWithMime(t *testing.T) {
	cases := []string{
		"application/json", "text/plain; charset=utf-8", "TEXT/HTML ; Charset=\"utf-8\"", "text",
		"text/", "/json", "text/plain;", "text/plain; ;", "text/plain; charset", "text/plain; charset=",
		"text/plain; a=1; a=1", "text/plain; a=1; A=2", "text/plain; a=\"x\\\"y\"", "text/plain; a=\"open",
		"text/plain; a=\"\"", "text/plain a=b", "text/plain; title*0*=us-ascii'en'x; title*1=y",
		"text/pl ain", " text/plain ", "text/plain;\u00a0a=b", "a{b}/c~d", "text/plain; a=b c",
		"text/plain\r\n", "text/plain; a=\"x\ny\"", "ü/x", "text/plain; a=b;", "", ";", "text/plain;;a=b",
	}
	for _, c := range cases {
		_, _, err := mime.ParseMediaType(c)
		want := err == nil && !strings.ContainsAny(c, "\r\n")
		if got := MediaType(c); got != want {
			t.Errorf("MediaType(%q) = %v, mime says %v (%v)", c, got, want, err)
		}
	}
}

// FuzzMediaType holds MediaType to mime.ParseMediaType on any input.
func FuzzMediaType(f *testing.F) {
	f.Add("text/plain; charset=utf-8")
	f.Add(`a/b; x="y\"z"; x*0=1`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _, err := mime.ParseMediaType(s)
		want := err == nil && !strings.ContainsAny(s, "\r\n")
		if got := MediaType(s); got != want {
			t.Fatalf("MediaType(%q) = %v, mime says %v (%v)", s, got, want, err)
		}
	})
}
