// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !kiln_custom || kiln_httpclient

package all

import (
	httpclient "github.com/kilnworks/kiln/capabilities/httpclient"
)

func init() {
	httpclient.RegisterKinds()
}
