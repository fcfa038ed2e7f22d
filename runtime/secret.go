package runtime

import (
	"fmt"
	"os"
)

// EnvSecret is the Services.Secret of a process without the secrets family
// (no [[secrets]] registry): the secret named NAME is the environment
// variable NAME. The value is registered with RedactSecret before it is
// returned; an unset or empty variable is an error naming the secret,
// never a silent empty value.
func EnvSecret(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("secret %s is not set (no [[secrets]] entry of that name and the environment variable is unset or empty)", name)
	}
	RedactSecret(name, v)
	return v, nil
}

// SecretValue returns the named secret through s.Secret, falling back to
// EnvSecret when no registry is installed.
func (s *Services) SecretValue(name string) (string, error) {
	if s != nil && s.Secret != nil {
		return s.Secret(name)
	}
	return EnvSecret(name)
}
