// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_env

package all

import (
	env "github.com/kilnworks/kiln/capabilities/env"
)

func init() {
	env.RegisterKinds()
}
