package pgstate

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnworks/kiln/capabilities/pgstate/pgtest"
	"github.com/kilnworks/kiln/runtime"
)

func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) != "" {
		replicaMain()
		return
	}
	pgtest.Main(m)
}

func open(t *testing.T, dsn string, lease time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{DSN: dsn, Lease: lease, QueryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func query[T any](t *testing.T, dsn, sql string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v T
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func sqlExec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationsOnceUnderConcurrentStart: replicas starting together apply
// each embedded migration exactly once (the advisory lock), and a database
// whose schema is newer than the binary is refused.
func TestMigrationsOnceUnderConcurrentStart(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := Open(context.Background(), Config{DSN: dsn, MaxConns: 2})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent start: %v", err)
	}
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_schema_migrations`); n != int64(len(all)) {
		t.Fatalf("%d migration rows, want %d", n, len(all))
	}
	sqlExec(t, dsn, `INSERT INTO kiln_schema_migrations (version, name) VALUES (999, '0999_future.sql')`)
	if _, err := Open(context.Background(), Config{DSN: dsn}); err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("a newer schema was not refused: %v", err)
	}
}

// TestOpenNeverQuotesTheConnectionString: a malformed DSN is refused
// without echoing it (it holds the password).
func TestOpenNeverQuotesTheConnectionString(t *testing.T) {
	_, err := Open(context.Background(), Config{DSN: "postgres://kiln:hunter2-secret@[::1/db"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}

func begin(t *testing.T, s *Store, key string) runtime.Claim {
	t.Helper()
	c, err := s.Begin(context.Background(), "POST /hook", key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClaimsAcrossReplicas: two stores (two replicas) on one database:
// a key in flight on one is refused on the other; a finished key is
// replayed everywhere until its TTL; an abandoned key runs again; the key
// itself is never stored.
func TestClaimsAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, b := open(t, dsn, time.Minute), open(t, dsn, time.Minute)
	ctx := context.Background()

	if c := begin(t, a, "k1"); c.Outcome != runtime.ClaimRun || c.TakenOver {
		t.Fatalf("first claim: %+v", c)
	}
	if c := begin(t, b, "k1"); c.Outcome != runtime.ClaimInFlight {
		t.Fatalf("in flight on a, b got %+v", c)
	}
	if c := begin(t, a, "k1"); c.Outcome != runtime.ClaimInFlight {
		t.Fatalf("in flight on a, a again got %+v", c)
	}
	// b cannot settle a's claim.
	if err := b.Finish(ctx, "POST /hook", "k1", time.Hour, runtime.StoredReply{Status: 500}); err != errClaimLost {
		t.Fatalf("b finished a's claim: %v", err)
	}
	_ = b.Abandon(ctx, "POST /hook", "k1")
	if err := a.Finish(ctx, "POST /hook", "k1", 2*time.Second, runtime.StoredReply{Status: 201, ContentType: "text/plain", Body: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	c := begin(t, b, "k1")
	if c.Outcome != runtime.ClaimReplay || c.Reply.Status != 201 || c.Reply.ContentType != "text/plain" || string(c.Reply.Body) != "hello" {
		t.Fatalf("replay on b: %+v %+v", c, c.Reply)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_claims WHERE scope <> 'POST /hook' OR length(key_hash) <> 32`); n != 0 {
		t.Fatal("the key is stored in clear")
	}

	// Abandoned: runs again anywhere.
	begin(t, a, "k2")
	if err := a.Abandon(ctx, "POST /hook", "k2"); err != nil {
		t.Fatal(err)
	}
	if c := begin(t, b, "k2"); c.Outcome != runtime.ClaimRun || c.TakenOver {
		t.Fatalf("abandoned key: %+v", c)
	}

	// After the TTL (database time), the reply is gone and the key runs
	// again; Sweep deletes expired replies only.
	sqlExec(t, dsn, `UPDATE kiln_claims SET expires_at = now() - interval '1 second' WHERE state = 'done'`)
	begin(t, a, "k3")
	if err := a.Finish(ctx, "POST /hook", "k3", time.Hour, runtime.StoredReply{Status: 200}); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `INSERT INTO kiln_claims (key_hash, scope, state, expires_at, status) VALUES ('\x00', 'x', 'done', now() - interval '1 hour', 200)`)
	a.Sweep(ctx)
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_claims WHERE state = 'done'`); n != 1 {
		t.Fatalf("after the sweep %d replies, want 1 (k3's live one)", n)
	}
	if c := begin(t, b, "k1"); c.Outcome != runtime.ClaimRun {
		t.Fatalf("expired reply replayed: %+v", c)
	}
}

// TestLeaseTakeover: a claim whose holder stopped renewing (a dead
// replica) is refused while its lease runs, then taken over; the late
// holder can no longer settle it. A live holder keeps its claim past
// many lease lengths.
func TestLeaseTakeover(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	// Generous: a loaded machine may delay a renewal by a second.
	const lease = 2 * time.Second
	a, b := open(t, dsn, lease), open(t, dsn, lease)
	ctx := context.Background()

	begin(t, a, "live")
	time.Sleep(2 * lease) // a renews every lease/3
	if c := begin(t, b, "live"); c.Outcome != runtime.ClaimInFlight {
		t.Fatalf("a live holder's claim was taken: %+v", c)
	}

	dead := open(t, dsn, lease)
	begin(t, dead, "k")
	dead.Close() // stops renewing, as a killed replica does
	if c := begin(t, b, "k"); c.Outcome != runtime.ClaimInFlight {
		t.Fatalf("taken over before the lease ran out: %+v", c)
	}
	deadline := time.Now().Add(5 * lease)
	for {
		c := begin(t, b, "k")
		if c.Outcome == runtime.ClaimRun {
			if !c.TakenOver {
				t.Fatal("not reported as a takeover")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead holder's claim was never taken over")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Finish(ctx, "POST /hook", "k", time.Hour, runtime.StoredReply{Status: 200}); err != nil {
		t.Fatal(err)
	}
}

// TestServingRoleNeedsOnlyDML: once an owner has applied the migrations,
// replicas run with a role that has only the grants docs/scaling.md lists
// (no CREATE anywhere), and such a role cannot create the schema itself.
func TestServingRoleNeedsOnlyDML(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	role := "serving_" + strings.ToLower(strings.TrimPrefix(query[string](t, dsn, `SELECT current_database()`), "t_"))
	sqlExec(t, dsn, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
	sqlExec(t, dsn, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		sqlExec(t, dsn, `DROP OWNED BY `+role)
		sqlExec(t, pgtest.DSN(t), `DROP ROLE `+role)
	})
	serving := strings.Replace(dsn, "user=kiln", "user="+role, 1)

	if _, err := Open(context.Background(), Config{DSN: serving}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a role without CREATE created the schema: %v", err)
	}
	open(t, dsn, time.Minute).Close() // the owner migrates
	sqlExec(t, dsn, `GRANT SELECT, INSERT, UPDATE, DELETE ON kiln_claims TO `+role)
	sqlExec(t, dsn, `GRANT SELECT ON kiln_schema_migrations TO `+role)
	sqlExec(t, dsn, `GRANT SELECT, INSERT, DELETE ON kiln_ticks TO `+role)
	sqlExec(t, dsn, `GRANT SELECT, INSERT, UPDATE, DELETE ON kiln_checkpoints, kiln_runs TO `+role)
	s := open(t, serving, time.Minute)
	ctx := context.Background()
	release, err := s.Claim(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, checkpoint("r1", runtime.CheckpointIncomplete, "b")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	release()
	if err := s.PutRun(ctx, runtime.RunRecord{ID: strings.Repeat("0", 32)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	s.SweepRuns(ctx)
	if c, err := s.Begin(ctx, "POST /hook", "k"); err != nil || c.Outcome != runtime.ClaimRun {
		t.Fatalf("%+v %v", c, err)
	}
	if err := s.Finish(ctx, "POST /hook", "k", time.Hour, runtime.StoredReply{Status: 200}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ClaimTick(ctx, "fleet/interval[0] 1s", time.Now().Truncate(time.Second)); err != nil || !ok {
		t.Fatalf("tick claim: %v %v", ok, err)
	}
	s.Sweep(ctx)
}

// TestManualMigration: with ManualMigrate (--state-migrate=manual) a
// serving role with DML only starts against a migrated database, and is
// refused against an unmigrated or half-migrated one with an error that
// names `state migrate`; MigrateOnce (`BIN state migrate`) brings the
// schema to this binary's version once and reports it.
func TestManualMigration(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	role := "dml_" + strings.ToLower(strings.TrimPrefix(query[string](t, dsn, `SELECT current_database()`), "t_"))
	sqlExec(t, dsn, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
	sqlExec(t, dsn, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		sqlExec(t, dsn, `DROP OWNED BY `+role)
		sqlExec(t, pgtest.DSN(t), `DROP ROLE `+role)
	})
	serving := strings.Replace(dsn, "user=kiln", "user="+role, 1)
	ctx := context.Background()
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := len(all)

	_, err = Open(ctx, Config{DSN: serving, ManualMigrate: true})
	if err == nil || !strings.Contains(err.Error(), "state migrate") || !strings.Contains(err.Error(), "version 0") {
		t.Fatalf("an unmigrated database: %v", err)
	}
	if n := query[*string](t, dsn, `SELECT to_regclass('kiln_schema_migrations')::text`); n != nil {
		t.Fatal("a manual start created the schema")
	}
	if _, _, err := MigrateOnce(ctx, Config{DSN: serving}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a role without CREATE migrated: %v", err)
	}
	from, to, err := MigrateOnce(ctx, Config{DSN: dsn})
	if err != nil || from != 0 || to != newest {
		t.Fatalf("migrate: %d -> %d, %v", from, to, err)
	}
	if from, to, err := MigrateOnce(ctx, Config{DSN: dsn}); err != nil || from != newest || to != newest {
		t.Fatalf("migrate again: %d -> %d, %v", from, to, err)
	}
	sqlExec(t, dsn, `GRANT SELECT ON kiln_schema_migrations TO `+role)
	sqlExec(t, dsn, `GRANT SELECT, INSERT, UPDATE, DELETE ON kiln_claims, kiln_ticks, kiln_checkpoints, kiln_runs TO `+role)
	s, err := Open(ctx, Config{DSN: serving, ManualMigrate: true})
	if err != nil {
		t.Fatalf("a DML role against a migrated database: %v", err)
	}
	s.Close()

	// One version behind: refused too, naming the versions.
	sqlExec(t, dsn, `DELETE FROM kiln_schema_migrations WHERE version = $1`, newest)
	_, err = Open(ctx, Config{DSN: serving, ManualMigrate: true})
	if err == nil || !strings.Contains(err.Error(), "state migrate") || !strings.Contains(err.Error(), fmt.Sprintf("version %d, this binary needs %d", newest-1, newest)) {
		t.Fatalf("a half-migrated database: %v", err)
	}
}
