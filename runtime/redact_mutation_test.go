package runtime

import (
	"fmt"
	"testing"
)

// Up to scanMax registered forms, a text is scanned form by form, and
// one without any comes back as it is (not copied); the last form is
// still found.
func TestRedactScansUpToScanMaxForms(t *testing.T) {
	old := redactor.Load()
	t.Cleanup(func() { redactor.Store(old) })
	forms := make([]string, scanMax)
	for i := range forms {
		forms[i] = fmt.Sprintf("scan-form-%02d", i)
	}
	redactor.Store(newRedactSet(forms))
	clean := []byte(`{"ok":true}`)
	if got := RedactBytes(clean); &got[0] != &clean[0] {
		t.Errorf("with %d forms, clean input was copied", scanMax)
	}
	if got := string(RedactBytes([]byte("x " + forms[scanMax-1]))); got != "x "+RedactedMarker {
		t.Errorf("last form not redacted: %q", got)
	}
}

// An escape right after another escape, or at the very start, is still
// read: a secret spelled with \u escapes behind a \n is found by decoding,
// never waved through as canonical.
func TestRedactJSONEscapeAfterEscape(t *testing.T) {
	for _, text := range []string{`"\n\u0061"`, `\u0061`, `"\t\/"`} {
		if canonicalJSON([]byte(text)) {
			t.Errorf("%s accepted as canonical", text)
		}
	}
	const secret = "zz-escaped-secret-41f0"
	RedactValue(secret)
	in := []byte(`{"k":"\n\u007az-escaped-secret-41f0"}`)
	got := string(RedactJSON(in))
	if got != `{"k":"\n[REDACTED]"}` {
		t.Errorf("RedactJSON(%s) = %s, want the escaped secret redacted", in, got)
	}
}

// A \u escape cut short by the end of the text is not canonical (and is
// never read past the end); one that ends exactly at the end of the text
// is judged like any other.
func TestCanonicalJSONEscapeAtTheEnd(t *testing.T) {
	for _, text := range []string{`"\u00`, `"\u00"`, `"\u002`, `\u`} {
		b := []byte(text)
		b = b[:len(b):len(b)] // nothing readable past the end
		if canonicalJSON(b) {
			t.Errorf("%s accepted as canonical", text)
		}
	}
	if !canonicalJSON([]byte(`"a\u0001`)) {
		t.Error(`a text ending in EncodeJSON's own \u0001 is not canonical`)
	}
}
