// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_pgstate

package all

import _ "github.com/kilnworks/kiln/capabilities/pgstate"
