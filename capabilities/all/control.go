// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_control

package all

import (
	control "github.com/kilnworks/kiln/capabilities/control"
)

func init() {
	control.RegisterKinds()
}
