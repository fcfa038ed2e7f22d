// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_llm

package all

import (
	llm "github.com/kilnworks/kiln/capabilities/llm"
)

func init() {
	llm.RegisterKinds()
}
