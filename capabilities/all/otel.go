// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_otel

package all

import _ "github.com/kilnworks/kiln/capabilities/otel"
