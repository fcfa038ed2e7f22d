// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_shell

package all

import (
	shell "github.com/kilnworks/kiln/capabilities/shell"
)

func init() {
	shell.RegisterKinds()
}
