package secrets

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOAuth2ErrorCodeEchoedOnlyWhenShort: a token endpoint's error code is
// quoted in the error only below 100 bytes, so a hostile endpoint cannot
// fill logs through it.
func TestOAuth2ErrorCodeEchoedOnlyWhenShort(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	for _, n := range []int{99, 100} {
		code := strings.Repeat("e", n)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":%q}`, code)
		}))
		_, _, err := host(t, decode(t, oauthTOML(ts.URL, "body", 60)))
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), "answered 400") {
			t.Fatalf("%d-byte code: %v", n, err)
		}
		if quoted := strings.Contains(err.Error(), "("+code+")"); quoted != (n < 100) {
			t.Errorf("%d-byte error code quoted=%v: %v", n, quoted, err)
		}
	}
}
