package secrets

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Undeclared names fall back to the environment when New is given no
// fallback.
func TestDefaultFallbackIsTheEnvironment(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_UNDECLARED", "from-env-1")
	reg, err := New(decode(t, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := reg.Secret("KILN_SECRETS_TEST_UNDECLARED"); err != nil || v != "from-env-1" {
		t.Fatalf("fallback: %q %v", v, err)
	}
}

// A refused [[secrets]] entry names the workflow file it is in.
func TestRefusedEntryNamesItsFile(t *testing.T) {
	wf := decode(t, "[[secrets]]\nname = \"X\"\nsource = \"vault\"\n")
	wf.Source = "/srv/flows/workflow.toml"
	if _, err := New(wf, nil); err == nil || !strings.Contains(err.Error(), "/srv/flows/workflow.toml") {
		t.Fatalf("got %v", err)
	}
}

// An entry without scopes sends no scope parameter at all (an empty one
// is refused by some token endpoints).
func TestNoScopeParameterWithoutScopes(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	ts := newTokenServer(t, "120")
	reg, err := New(decode(t, fmt.Sprintf(`
[[secrets]]
name = "SF"
source = "oauth2"
token_url = %q
client_id_env = "KILN_SECRETS_TEST_CID"
client_secret_env = "KILN_SECRETS_TEST_CSECRET"
`, ts.URL+"/token")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := reg.Secret("SF"); err != nil || v != "access-token-1" {
		t.Fatalf("token %q %v", v, err)
	}
	form, _ := ts.lastForm.Load().(map[string]string)
	if _, ok := form["scope"]; ok || form["grant_type"] != "client_credentials" {
		t.Fatalf("form %v", form)
	}
}
