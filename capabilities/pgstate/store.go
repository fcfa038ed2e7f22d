// Package pgstate is the PostgreSQL state backend shared by every replica
// of a sealed binary: idempotency claims and recorded replies (N replicas
// behind a load balancer run each keyed request once), schedule ticks
// (one fire per tick), checkpoints with the owner of each executing run
// (a run resumes on any replica) and async run records. Claims and run
// owners carry leases that the holding replica renews; a replica that
// dies stops renewing and its claims and runs are taken over once the
// lease has run out. See docs/scaling.md.
package pgstate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kilnworks/kiln/runtime"
)

const (
	defaultQueryTimeout = 5 * time.Second
	defaultLease        = 30 * time.Second
	defaultMaxConns     = 10
	// maxReplyBytes bounds a recorded reply, as the file store's are by
	// the route's own reply limit; a larger one is refused, not truncated.
	maxReplyBytes = 8 << 20
)

// Config configures the backend. The DSN comes from a secret or an
// environment variable the workflow names, never from the workflow.
type Config struct {
	DSN string
	// MaxConns and MinConns bound the connection pool (0: 10 and 0).
	MaxConns, MinConns int32
	// QueryTimeout bounds every statement (0: 5s).
	QueryTimeout time.Duration
	// Lease is how long a claim or a run's ownership outlives its
	// holder's last renewal (0: 30s). The holder renews every Lease/3.
	Lease time.Duration
	// Workflow names the workflow whose checkpoints List returns ("":
	// every workflow's).
	Workflow string
	// ManualMigrate leaves the schema alone at Open: it must already be
	// at this binary's version (`BIN state migrate` applies it), so a
	// serving role with DML only can run.
	ManualMigrate bool
}

// Store is the PostgreSQL state of a fleet: a runtime.ClaimStore,
// TickClaims, CheckpointStore (checkpoints.go) and RunStore (runs.go).
type Store struct {
	pool     *pgxpool.Pool
	owner    string // this replica's id: random per process
	timeout  time.Duration
	lease    time.Duration
	workflow string

	mu   sync.Mutex
	runs map[string]bool // the runs this replica claimed (CheckpointStore)

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

var (
	_ runtime.ClaimStore = (*Store)(nil)
	_ runtime.TickClaims = (*Store)(nil)
)

// Open connects, applies the embedded migrations under an advisory lock
// (or, with ManualMigrate, checks they were applied) and starts renewing
// this replica's leases.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{owner: newOwnerID(), timeout: cfg.QueryTimeout, lease: cfg.Lease, workflow: cfg.Workflow,
		runs: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	if s.timeout <= 0 {
		s.timeout = defaultQueryTimeout
	}
	if s.lease <= 0 {
		s.lease = defaultLease
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstate: %w", err)
	}
	mctx, cancel := context.WithTimeout(ctx, 4*s.timeout) // waiting for another replica's migration included
	if cfg.ManualMigrate {
		err = checkSchema(mctx, s.pool)
	} else {
		_, err = Migrate(mctx, s.pool)
	}
	cancel()
	if err != nil {
		s.pool.Close()
		return nil, err
	}
	go s.renew()
	return s, nil
}

// poolConfig is cfg's pool: its limits, and every connection attempt and
// statement bounded by the query timeout.
func poolConfig(cfg Config) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx's message can quote the DSN, password included: never pass it on.
		return nil, errors.New("pgstate: the connection string does not parse")
	}
	pc.MaxConns = defaultMaxConns
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if cfg.MinConns > 0 {
		pc.MinConns = min(cfg.MinConns, pc.MaxConns)
	}
	timeout := cfg.QueryTimeout
	if timeout <= 0 {
		timeout = defaultQueryTimeout
	}
	if pc.ConnConfig.ConnectTimeout == 0 || pc.ConnConfig.ConnectTimeout > timeout {
		pc.ConnConfig.ConnectTimeout = timeout
	}
	// The server bounds each statement too, should a client-side
	// cancellation never reach it.
	pc.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(timeout.Milliseconds())
	return pc, nil
}

// Close stops renewing (claims still held lapse after the lease) and
// closes the pool.
func (s *Store) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	s.pool.Close()
}

// Ping checks the database within the query timeout (/readyz).
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.pool.Ping(ctx)
}

// Owner is this replica's id as its claims record it.
func (s *Store) Owner() string { return s.owner }

func newOwnerID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bound gives every statement the query timeout. Settling a claim must
// not be cut short by the request that made it, so the caller's
// cancellation is ignored but never its absence of a bound.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
}

func keyHash(scope, key string) []byte {
	sum := sha256.Sum256([]byte(scope + "\n" + key))
	return sum[:]
}

func (s *Store) leaseInterval() string { return pgInterval(s.lease) }

// pgInterval is d as a PostgreSQL interval literal, for $n::interval.
func pgInterval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }

// Begin claims (scope, key): a new key is inserted in flight for this
// replica; an existing row is read under a row lock and either replayed
// (done, not expired), refused (in flight, lease live) or taken over
// (lease run out, or reply expired). All times are the database's, so
// replicas with skewed clocks agree.
func (s *Store) Begin(ctx context.Context, scope, key string) (runtime.Claim, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	h := keyHash(scope, key)
	for range 3 {
		var c runtime.Claim
		var again bool
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO kiln_claims (key_hash, scope, state, owner, lease_until)
				VALUES ($1, $2, 'in_flight', $3, now() + $4::interval) ON CONFLICT (key_hash) DO NOTHING`,
				h, scope, s.owner, s.leaseInterval())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				c = runtime.Claim{Outcome: runtime.ClaimRun}
				return nil
			}
			var state string
			var live bool
			var status *int32
			var ctype *string
			var body []byte
			err = tx.QueryRow(ctx, `SELECT state,
					CASE state WHEN 'in_flight' THEN lease_until > now() ELSE expires_at > now() END,
					status, content_type, body
				FROM kiln_claims WHERE key_hash = $1 FOR UPDATE`, h).Scan(&state, &live, &status, &ctype, &body)
			if errors.Is(err, pgx.ErrNoRows) {
				again = true // abandoned between the insert and the read
				return nil
			}
			if err != nil {
				return err
			}
			switch {
			case state == "done" && live:
				r := &runtime.StoredReply{Body: body}
				if status != nil {
					r.Status = int(*status)
				}
				if ctype != nil {
					r.ContentType = *ctype
				}
				c = runtime.Claim{Outcome: runtime.ClaimReplay, Reply: r}
				return nil
			case state == "in_flight" && live:
				c = runtime.Claim{Outcome: runtime.ClaimInFlight}
				return nil
			}
			_, err = tx.Exec(ctx, `UPDATE kiln_claims SET state = 'in_flight', owner = $2,
					lease_until = now() + $3::interval, expires_at = NULL, status = NULL, content_type = NULL,
					body = NULL, created_at = now()
				WHERE key_hash = $1`, h, s.owner, s.leaseInterval())
			c = runtime.Claim{Outcome: runtime.ClaimRun, TakenOver: state == "in_flight"}
			return err
		})
		if err != nil {
			return runtime.Claim{}, fmt.Errorf("idempotency store: %w", err)
		}
		if !again {
			return c, nil
		}
	}
	return runtime.Claim{}, errors.New("idempotency store: the claim keeps being released under us")
}

// errClaimLost: our lease ran out and another replica took the key.
var errClaimLost = errors.New("idempotency store: the claim was lost (its lease ran out and another replica took it over)")

// Finish records the reply and releases the claim, only if this replica
// still holds it.
func (s *Store) Finish(ctx context.Context, scope, key string, ttl time.Duration, r runtime.StoredReply) error {
	if len(r.Body) > maxReplyBytes {
		_ = s.Abandon(ctx, scope, key)
		return fmt.Errorf("idempotency store: a reply of %d bytes is over the %d-byte limit; not recorded", len(r.Body), maxReplyBytes)
	}
	// The run has happened: its reply must reach the database, or a
	// redelivery would run it again. A database that is away briefly is
	// waited for, as long as the claim can still be ours (one lease).
	deadline := time.Now().Add(s.lease)
	for {
		qctx, cancel := s.bound(ctx)
		tag, err := s.pool.Exec(qctx, `UPDATE kiln_claims SET state = 'done', owner = NULL, lease_until = NULL,
				expires_at = now() + $3::interval, status = $4, content_type = $5, body = $6
			WHERE key_hash = $1 AND state = 'in_flight' AND owner = $2`,
			keyHash(scope, key), s.owner, pgInterval(ttl), r.Status, r.ContentType, r.Body)
		cancel()
		switch {
		case err == nil && tag.RowsAffected() != 1:
			return errClaimLost
		case err == nil:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("idempotency store: the reply was not recorded: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Abandon deletes the claim if this replica still holds it.
func (s *Store) Abandon(ctx context.Context, scope, key string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DELETE FROM kiln_claims WHERE key_hash = $1 AND state = 'in_flight' AND owner = $2`,
		keyHash(scope, key), s.owner)
	if err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

// Sweep deletes expired replies, day-old ticks and dead runs' claims
// that never checkpointed, a bounded batch of each per call.
func (s *Store) Sweep(ctx context.Context) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM kiln_claims WHERE key_hash IN (
		SELECT key_hash FROM kiln_claims WHERE state = 'done' AND expires_at <= now() LIMIT 10000)`)
	_, _ = s.pool.Exec(ctx, `DELETE FROM kiln_ticks WHERE (trigger, slot) IN (
		SELECT trigger, slot FROM kiln_ticks WHERE slot < now() - interval '1 day' LIMIT 10000)`)
	// A run claimed by a replica that died before its first checkpoint
	// leaves a row without one: nobody can resume it, so it goes.
	_, _ = s.pool.Exec(ctx, `DELETE FROM kiln_checkpoints WHERE run_id IN (
		SELECT run_id FROM kiln_checkpoints WHERE data IS NULL AND lease_until < now() - interval '1 hour' LIMIT 10000)`)
}

// ClaimTick is true for exactly one replica per (trigger, slot): the one
// whose insert lands first. An error means nobody may assume the tick.
func (s *Store) ClaimTick(ctx context.Context, trigger string, slot time.Time) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `INSERT INTO kiln_ticks (trigger, slot, owner) VALUES ($1, $2, $3)
		ON CONFLICT (trigger, slot) DO NOTHING`, trigger, slot.UTC().Truncate(time.Millisecond), s.owner)
	if err != nil {
		return false, fmt.Errorf("tick claims: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// renew extends the leases of this replica's claims and runs every
// Lease/3, and
// sweeps expired replies now and then. A renewal that fails (database
// away) is retried at the next tick; should the lease run out meanwhile,
// Finish reports the claim lost rather than overwrite another's.
func (s *Store) renew() {
	defer close(s.done)
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := s.bound(context.Background())
		_, _ = s.pool.Exec(ctx, `UPDATE kiln_claims SET lease_until = now() + $2::interval
			WHERE state = 'in_flight' AND owner = $1`, s.owner, s.leaseInterval())
		_, _ = s.pool.Exec(ctx, `UPDATE kiln_checkpoints SET lease_until = now() + $2::interval
			WHERE owner = $1`, s.owner, s.leaseInterval())
		cancel()
		if n%100 == 0 {
			s.Sweep(context.Background())
			s.SweepRuns(context.Background())
		}
	}
}
