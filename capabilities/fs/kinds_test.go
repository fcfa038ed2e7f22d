package fs_test

import (
	"github.com/kilnworks/kiln/capabilities/data"
	"github.com/kilnworks/kiln/capabilities/data/parsejson"
	"github.com/kilnworks/kiln/capabilities/fs"
)

// Families register no node kind from init (a generated program registers
// the kinds its workflow uses): these tests register the families' kinds
// they load workflows with.
func init() {
	data.RegisterKinds()
	parsejson.RegisterKinds()
	fs.RegisterKinds()
}
