// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_schema

package all

import _ "github.com/kilnworks/kiln/capabilities/schema"
