package runtime

import (
	"crypto/sha256"
	"encoding/hex"
)

// IdempotencyKey is the node's stable key for this run: the hex SHA-256 of
// "<run id>.<node id>". A run resumed after a crash keeps its run id, so a
// side-effecting node that runs again (at-least-once) presents the same
// key, and a receiver can recognise the repeat. http_request sends it as
// the Idempotency-Key header, shell_run as KILN_IDEMPOTENCY_KEY.
func (c *Call) IdempotencyKey() string {
	sum := sha256.Sum256([]byte(c.Run.ID() + "." + c.Node.ID))
	return hex.EncodeToString(sum[:])
}
