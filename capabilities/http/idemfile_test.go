package http

import (
	"time"

	"github.com/kilnworks/kiln/runtime"
)

// The idempotency tests look at the default file store's files directly.

type idemEntry = runtime.FileClaimRecord

func lockFile(path string) string { return runtime.ClaimLockPath(path) }

func newIdemStore(stateDir string, now func() time.Time) *idemStore {
	return &idemStore{store: runtime.NewFileClaims(stateDir, now)}
}

// file is the record path of (route, key) in the file store.
func (s *idemStore) file(route, key string) string {
	return s.store.(*runtime.FileClaims).Path(route, key)
}
