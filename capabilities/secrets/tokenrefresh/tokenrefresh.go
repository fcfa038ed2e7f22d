// Package tokenrefresh lets a client that sends a [[secrets]] oauth2
// token talk back to the secrets registry: a server refused the token
// (HTTP 401), so the next use fetches a new one instead of serving the
// cached token until its expiry; or the server's authorization server,
// found by discovery and checked by the client, has another token
// endpoint. It holds only the hand-over, so a family can use it without
// linking the secrets family.
package tokenrefresh

import (
	"errors"

	"github.com/kilnworks/kiln/runtime"
)

type key struct{}

type hooks struct {
	refused  func(name, value string)
	retarget func(name, tokenURL string) error
}

// Install makes the secrets registry's methods the handlers of svc.
func Install(svc *runtime.Services, refused func(name, value string), retarget func(name, tokenURL string) error) {
	svc.Values.Store(key{}, hooks{refused, retarget})
}

// Refused reports that value, the current value of the secret name, was
// refused. Without a registry (no [[secrets]]) nothing is cached, so
// there is nothing to drop.
func Refused(svc *runtime.Services, name, value string) {
	if h, ok := load(svc); ok {
		h.refused(name, value)
	}
}

// Retarget points the oauth2 secret name at tokenURL.
func Retarget(svc *runtime.Services, name, tokenURL string) error {
	h, ok := load(svc)
	if !ok {
		return errors.New("no [[secrets]] registry holds oauth2 client credentials")
	}
	return h.retarget(name, tokenURL)
}

func load(svc *runtime.Services) (hooks, bool) {
	if svc == nil {
		return hooks{}, false
	}
	v, ok := svc.Values.Load(key{})
	if !ok {
		return hooks{}, false
	}
	return v.(hooks), true
}
