package http

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kilnworks/kiln/runtime"
)

// idempotencyCode is the code of keyed routes (idempotency_key): the
// claim store (the state directory's, unless a backend is installed) and
// the key's extraction. It is set by EnableIdempotency, so a program that
// does not call it links neither.
type idempotencyCode struct {
	store func(*runtime.Engine) runtime.ClaimStore
	key   func(spec string, trigger map[string]any, body []byte) (string, error)
}

var idempotency *idempotencyCode

// EnableIdempotency links keyed routes. The generated program calls it
// when its workflow declares an idempotency_key, capabilities/all for
// kiln run.
func EnableIdempotency() {
	idempotency = &idempotencyCode{store: runtime.ClaimStoreFor, key: idempotencyKey}
}

// errNoIdempotency refuses a keyed route in a program without
// EnableIdempotency: it is never served without its replay guarantee.
var errNoIdempotency = errors.New("idempotency_key is declared, but this binary was built without idempotency support (http.EnableIdempotency): build it again with kiln build or go generate")

// idemStore is the server's view of the process's claim store
// (runtime.ClaimStore: the state directory by default, or a shared
// backend). Webhook providers deliver at least once; a redelivery within
// the TTL gets the recorded reply instead of a second run, and a key in
// flight anywhere the store reaches is refused.
type idemStore struct {
	store runtime.ClaimStore
}

// claim outcomes, as the server switches on them.
const (
	claimRun      = int(runtime.ClaimRun)      // run it; the caller must finish or abandon
	claimReplay   = int(runtime.ClaimReplay)   // a recorded reply exists
	claimInFlight = int(runtime.ClaimInFlight) // the same key is running now: 409
)

// idemReply is a recorded reply.
type idemReply = runtime.StoredReply

// begin claims (route, key). takenOver reports the in-flight claim of a
// run whose holder is gone (crashed, or its lease ran out).
func (s *idemStore) begin(route, key string) (result int, e *idemReply, takenOver bool, err error) {
	c, err := s.store.Begin(context.Background(), route, key)
	if err != nil {
		return 0, nil, false, err
	}
	return int(c.Outcome), c.Reply, c.TakenOver, nil
}

// finish records a reply for ttl and releases the claim.
func (s *idemStore) finish(route, key string, ttl time.Duration, status int, contentType string, body []byte) error {
	return s.store.Finish(context.Background(), route, key, ttl, runtime.StoredReply{Status: status, ContentType: contentType, Body: body})
}

// abandon forgets a claim, so the key stays retryable (failed runs).
func (s *idemStore) abandon(route, key string) error {
	return s.store.Abandon(context.Background(), route, key)
}

// sweep is start-up housekeeping: expired replies go.
func (s *idemStore) sweep() { s.store.Sweep(context.Background()) }

// idempotencyKey extracts a route's key from the request: the hex
// SHA-256 of the raw body, or a scalar at a dotted path of the payload
// ("trigger." prefix accepted). Scalars are type-tagged so 1 and "1"
// are different keys.
func idempotencyKey(spec string, trigger map[string]any, body []byte) (string, error) {
	if spec == "body_sha256" {
		sum := sha256.Sum256(body)
		return "body_sha256:" + hex.EncodeToString(sum[:]), nil
	}
	path := strings.TrimPrefix(spec, "trigger.")
	v, ok := runtime.Lookup(trigger, path)
	if !ok {
		return "", fmt.Errorf("idempotency key %s is missing from the request", spec)
	}
	switch x := v.(type) {
	case string:
		return "s:" + x, nil
	case json.Number:
		return "n:" + x.String(), nil
	case bool:
		return fmt.Sprintf("b:%t", x), nil
	}
	return "", fmt.Errorf("idempotency key %s must be a string, number or boolean, not %s", spec, runtime.SwitchLabel(v))
}
