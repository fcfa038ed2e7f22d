// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_data

package all

import (
	data "github.com/kilnworks/kiln/capabilities/data"
	parsejson "github.com/kilnworks/kiln/capabilities/data/parsejson"
)

func init() {
	data.RegisterKinds()
	parsejson.RegisterKinds()
}
