// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_mcp

package all

import (
	mcp "github.com/kilnworks/kiln/capabilities/mcp"
)

func init() {
	mcp.RegisterKinds()
}
