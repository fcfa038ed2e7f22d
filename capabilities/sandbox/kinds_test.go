package sandbox_test

import (
	"github.com/kilnworks/kiln/capabilities/compose"
	"github.com/kilnworks/kiln/capabilities/control"
	"github.com/kilnworks/kiln/capabilities/data"
	"github.com/kilnworks/kiln/capabilities/data/parsejson"
	"github.com/kilnworks/kiln/capabilities/env"
	"github.com/kilnworks/kiln/capabilities/event"
	"github.com/kilnworks/kiln/capabilities/fs"
	"github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/capabilities/httpclient"
	"github.com/kilnworks/kiln/capabilities/llm"
	"github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/capabilities/shell"
)

// Families register no node kind from init (a generated program registers
// the kinds its workflow uses): these tests register the families' kinds
// they load workflows with, and, as capabilities/all does, every auth kind
// and optional part of the routes family.
func init() {
	control.RegisterKinds()
	data.RegisterKinds()
	parsejson.RegisterKinds()
	fs.RegisterKinds()
	env.RegisterKinds()
	mcp.RegisterKinds()
	event.RegisterKinds()
	compose.RegisterKinds()
	shell.RegisterKinds()
	httpclient.RegisterKinds()
	llm.RegisterKinds()
	http.RegisterAuthKinds()
	http.EnableTLS()
	http.EnableAsync()
	http.EnableIdempotency()
}
