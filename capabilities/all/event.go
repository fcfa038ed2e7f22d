// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_event

package all

import (
	event "github.com/kilnworks/kiln/capabilities/event"
)

func init() {
	event.RegisterKinds()
}
