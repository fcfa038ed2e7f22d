package fire

import (
	"context"
	"time"

	"github.com/kilnworks/kiln/runtime"
)

// ClaimFleetTick asks the fleet whether this replica fires the tick
// scheduled at slot, adding slot_unix_ms to payload. Another replica's
// tick is skipped quietly (debug); a claim that cannot be asked (the
// state database away) skips the tick too, audited: firing it here could
// fire it twice.
func (g *Gate) ClaimFleetTick(ctx context.Context, fleet runtime.TickClaims, slot time.Time, payload map[string]any) bool {
	payload["slot_unix_ms"] = slot.UnixMilli()
	ok, err := fleet.ClaimTick(ctx, g.Host.Program.Workflow.Name+"/"+g.Name, slot)
	switch {
	case err != nil:
		g.audit().Warn(g.Prefix+".skipped", "trigger", g.Name, "start_node", g.StartNode, "tick", payload["tick"],
			"reason", "the fleet's tick claim failed", "error", err.Error())
		return false
	case !ok:
		g.audit().Debug(g.Prefix+".fleet_skip", "trigger", g.Name, "tick", payload["tick"], "detail", "another replica fires this tick")
		return false
	}
	return true
}
