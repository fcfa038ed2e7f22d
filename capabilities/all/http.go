// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_http

package all

import (
	http "github.com/kilnworks/kiln/capabilities/http"
)

func init() {
	http.RegisterAuthKinds()
	http.EnableTLS()
	http.EnableAsync()
	http.EnableIdempotency()
}
