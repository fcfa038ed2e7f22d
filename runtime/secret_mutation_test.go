package runtime

import (
	"errors"
	"strings"
	"testing"
)

// Without a secrets registry a secret is its environment variable: an
// unset or empty one is an error naming the secret, and a value is
// registered for redaction before it is returned.
func TestEnvSecret(t *testing.T) {
	isolateSecrets(t)
	t.Setenv("KILN_TEST_ENV_SECRET", "env-secret-value-93ac")
	t.Setenv("KILN_TEST_EMPTY_SECRET", "")
	v, err := EnvSecret("KILN_TEST_ENV_SECRET")
	if err != nil || v != "env-secret-value-93ac" {
		t.Fatalf("EnvSecret = %q, %v", v, err)
	}
	if got := Redact("token env-secret-value-93ac"); got != "token "+RedactedMarker {
		t.Errorf("the value was not registered for redaction: %q", got)
	}
	for _, name := range []string{"KILN_TEST_EMPTY_SECRET", "KILN_TEST_UNSET_SECRET_7f"} {
		if v, err := EnvSecret(name); err == nil || v != "" || !strings.Contains(err.Error(), "secret "+name+" is not set") {
			t.Errorf("EnvSecret(%s) = %q, %v; want an error naming it", name, v, err)
		}
	}
}

// SecretValue asks the registry when one is installed, and the
// environment otherwise.
func TestSecretValueUsesTheRegistry(t *testing.T) {
	isolateSecrets(t)
	t.Setenv("KILN_TEST_BOTH", "from-environment-1b7d")
	reg := &Services{Secret: func(name string) (string, error) {
		if name == "KILN_TEST_BOTH" {
			return "from-registry-5e21", nil
		}
		return "", errors.New("no such secret")
	}}
	if v, err := reg.SecretValue("KILN_TEST_BOTH"); err != nil || v != "from-registry-5e21" {
		t.Errorf("with a registry: %q, %v; want the registry's value", v, err)
	}
	if _, err := reg.SecretValue("KILN_TEST_OTHER"); err == nil {
		t.Error("the registry's refusal was not returned")
	}
	for _, s := range []*Services{nil, {}} {
		if v, err := s.SecretValue("KILN_TEST_BOTH"); err != nil || v != "from-environment-1b7d" {
			t.Errorf("without a registry (%v): %q, %v; want the environment's value", s, v, err)
		}
	}
}

// An object key stays as it is even with whitespace before its colon; the
// value after it is redacted.
func TestRedactJSONKeyBeforeSpacedColon(t *testing.T) {
	isolateSecrets(t)
	RedactValue("spaced-secret-0c4e")
	in := "{\"spaced-secret-0c4e\" \t\r\n: \"spaced-secret-0c4e\"}"
	want := "{\"spaced-secret-0c4e\" \t\r\n: \"[REDACTED]\"}"
	if got := string(RedactJSON([]byte(in))); got != want {
		t.Errorf("RedactJSON(%q) = %q, want %q", in, got, want)
	}
}
