// Package templates holds the text templates of the non-Go files kiln
// generates (go.mod of a generated module). They are embedded so a
// released kiln binary needs no files beside it.
package templates

import "embed"

// FS holds every *.tmpl file of this directory.
//
//go:embed *.tmpl
var FS embed.FS
