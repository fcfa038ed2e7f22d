package secrets

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
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

// skew_secs = 0 is honoured (not the default 60), and a fractional
// expires_in counts its whole seconds: a token issued for 120.5 s stays
// cached at 100 s and is fetched again at 121 s.
func TestZeroSkewAndFractionalExpiry(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	ts := newTokenServer(t, `"120.5"`)
	reg, err := New(decode(t, oauthTOML(ts.URL, "body", 0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	reg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	if err := reg.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	advance(100 * time.Second)
	if v, _ := reg.Secret("SF"); v != "access-token-1" || ts.calls.Load() != 1 {
		t.Fatalf("at 100 s: %q after %d calls", v, ts.calls.Load())
	}
	advance(21 * time.Second)
	if v, _ := reg.Secret("SF"); v != "access-token-2" || ts.calls.Load() != 2 {
		t.Fatalf("at 121 s: %q after %d calls", v, ts.calls.Load())
	}
}

// Set up on a host without services, the family installs its own and
// its SIGHUP reloader; closing removes the reloader (and is safe twice).
func TestSetupWithoutServicesAndClose(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_VAR", "env-value-2")
	p, err := runtime.Compile(decode(t, "[[secrets]]\nname = \"E\"\nsource = \"env\"\nvar = \"KILN_SECRETS_TEST_VAR\"\n"), runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &runtime.Host{Program: p, Engine: &runtime.Engine{}}
	if err := setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if h.Engine.Services == nil || h.Engine.Services.Secret == nil {
		t.Fatal("no secret service installed")
	}
	if v, err := h.Engine.Services.Secret("E"); err != nil || v != "env-value-2" {
		t.Fatalf("E = %q %v", v, err)
	}
	for i := 0; i < 2; i++ {
		if err := closeActive(); err != nil {
			t.Fatal(err)
		}
		activeMu.Lock()
		installed := stopHUP != nil
		activeMu.Unlock()
		if installed {
			t.Fatalf("close %d: the SIGHUP reloader is still installed", i+1)
		}
	}
}

// A command source that fails says how it ended, not that it timed out.
func TestFailingCommandNamesItsExit(t *testing.T) {
	reg, err := New(decode(t, "[[secrets]]\nname = \"C\"\nsource = \"command\"\nargv = [\"/bin/sh\", \"-c\", \"exit 3\"]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = reg.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), "failed (exit status 3)") || strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("got %v", err)
	}
}
