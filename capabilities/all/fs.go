// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_fs

package all

import (
	fs "github.com/kilnworks/kiln/capabilities/fs"
)

func init() {
	fs.RegisterKinds()
}
