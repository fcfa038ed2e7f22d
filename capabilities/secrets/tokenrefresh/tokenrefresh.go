// Package tokenrefresh lets a client that sends a [[secrets]] oauth2
// token tell the secrets registry that a server refused it (HTTP 401), so
// the next use fetches a new one instead of serving the cached token
// until its expiry. It holds only the hand-over, so a family can use it
// without linking the secrets family.
package tokenrefresh

import "github.com/kilnworks/kiln/runtime"

type key struct{}

// Install makes refused the handler of svc's refusals (the secrets
// registry's).
func Install(svc *runtime.Services, refused func(name, value string)) {
	svc.Values.Store(key{}, refused)
}

// Refused reports that value, the current value of the secret name, was
// refused. Without a registry (no [[secrets]]) nothing is cached, so
// there is nothing to drop.
func Refused(svc *runtime.Services, name, value string) {
	if svc == nil {
		return
	}
	if f, ok := svc.Values.Load(key{}); ok {
		f.(func(string, string))(name, value)
	}
}
