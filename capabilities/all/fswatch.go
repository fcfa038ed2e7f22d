// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_fswatch

package all

import _ "github.com/kilnworks/kiln/capabilities/fswatch"
