package runtime

import (
	"context"
	"time"
)

// ClaimStore holds the idempotency claims and recorded replies of keyed
// routes. Every process that shares one store behaves as one agent at the
// route boundary: a key claimed by one is refused or replayed by all the
// others. The default is FileClaims under --state-dir (one host); the
// pgstate family shares it across hosts. See docs/scaling.md.
//
// scope names what the key belongs to (the route); a store never keeps the
// key itself, only a digest of (scope, key).
type ClaimStore interface {
	// Begin claims (scope, key). ClaimRun obliges the caller to Finish or
	// Abandon the claim.
	Begin(ctx context.Context, scope, key string) (Claim, error)
	// Finish records the reply for ttl and releases the claim.
	Finish(ctx context.Context, scope, key string, ttl time.Duration, reply StoredReply) error
	// Abandon forgets the claim, so the key stays retryable.
	Abandon(ctx context.Context, scope, key string) error
	// Sweep deletes expired replies (housekeeping); it never touches a
	// claim someone holds.
	Sweep(ctx context.Context)
}

// ClaimOutcome is what Begin decided.
type ClaimOutcome int

const (
	ClaimRun      ClaimOutcome = iota // run it; the caller must Finish or Abandon
	ClaimReplay                       // a recorded reply exists: Claim.Reply
	ClaimInFlight                     // a live holder runs this key now: refuse (409)
)

// Claim is Begin's answer. TakenOver reports that the key was in flight
// for a holder that is gone (crashed, or its lease ran out).
type Claim struct {
	Outcome   ClaimOutcome
	Reply     *StoredReply
	TakenOver bool
}

// StoredReply is a recorded route reply, replayed to redeliveries.
type StoredReply struct {
	Status      int
	ContentType string
	Body        []byte
}

type claimStoreKey struct{}

// SetClaimStore installs the process's shared claim store (a state
// backend's Setup does this); it replaces the file default.
func SetClaimStore(s *Services, c ClaimStore) { s.Values.Store(claimStoreKey{}, c) }

// ClaimStoreFor returns the engine's claim store: the installed backend,
// else the file store under StateDir, else nil (no state: keyed routes
// cannot run).
func ClaimStoreFor(e *Engine) ClaimStore {
	if c, ok := installed[ClaimStore](e, claimStoreKey{}); ok {
		return c
	}
	if e.StateDir == "" {
		return nil
	}
	return NewFileClaims(e.StateDir, e.now)
}

// installed returns what a state backend stored under key in e's
// services, if anything.
func installed[T any](e *Engine, key any) (T, bool) {
	var zero T
	if e.Services == nil {
		return zero, false
	}
	v, ok := e.Services.Values.Load(key)
	if !ok {
		return zero, false
	}
	return v.(T), true
}

// TickClaims decides which process fires a schedule's tick when several
// replicas share a state backend: ClaimTick is true for exactly one
// caller per (trigger, slot) across them. A process without it fires
// every tick itself.
type TickClaims interface {
	ClaimTick(ctx context.Context, trigger string, slot time.Time) (bool, error)
}

type tickClaimsKey struct{}

// SetTickClaims installs the fleet's tick claims (a shared state
// backend's Setup does this).
func SetTickClaims(s *Services, c TickClaims) { s.Values.Store(tickClaimsKey{}, c) }

// TickClaimsFor returns the installed tick claims, or nil: this process
// alone decides its ticks.
func TickClaimsFor(e *Engine) TickClaims {
	c, _ := installed[TickClaims](e, tickClaimsKey{})
	return c
}
