// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_compose

package all

import (
	compose "github.com/kilnworks/kiln/capabilities/compose"
)

func init() {
	compose.RegisterKinds()
}
