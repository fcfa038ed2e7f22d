package event_test

import (
	"github.com/kilnworks/kiln/capabilities/control"
	"github.com/kilnworks/kiln/capabilities/data"
	"github.com/kilnworks/kiln/capabilities/data/parsejson"
	"github.com/kilnworks/kiln/capabilities/event"
)

// Families register no node kind from init (a generated program registers
// the kinds its workflow uses): these tests register the families' kinds
// they load workflows with.
func init() {
	control.RegisterKinds()
	data.RegisterKinds()
	parsejson.RegisterKinds()
	event.RegisterKinds()
}
