package templates

import "embed"

// Deploy holds the templates of `kiln deploy` and `kiln package`
// (package gen/deploy): Kubernetes manifests and systemd units.
//
//go:embed deploy/*.tmpl
var Deploy embed.FS
