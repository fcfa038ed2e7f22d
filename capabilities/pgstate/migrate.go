package pgstate

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockID is the pg_advisory_lock key that serialises migrations
// across replicas starting at once ("kilnmig" in ASCII).
const migrationLockID int64 = 0x6b696c6e6d6967

// migration is one embedded file, NNNN_name.sql, applied once in order.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("pgstate: migration %s is not named NNNN_name.sql", e.Name())
		}
		data, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstate: migration %s: versions must run 1, 2, 3... without gaps", m.name)
		}
	}
	return out, nil
}

// Migrate brings the schema to the newest embedded version. It holds a
// session advisory lock on one connection for the whole time, so replicas
// starting together apply each migration exactly once; each migration and
// its version row commit in one transaction. A database newer than this
// binary is refused: its schema may mean something this code does not do.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (version int, err error) {
	all, err := migrations()
	if err != nil {
		return 0, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstate: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockID); err != nil {
		return 0, fmt.Errorf("pgstate: migrate: advisory lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must go even when ctx has expired.
		uctx, cancel := context.WithTimeout(context.Background(), defaultQueryTimeout)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, migrationLockID); uerr != nil {
			conn.Conn().Close(uctx) // closing the session drops the lock
		}
	}()
	// Created only when missing: CREATE ... IF NOT EXISTS would still
	// ask a serving role without CREATE for the privilege.
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('kiln_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("pgstate: migrate: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS kiln_schema_migrations (
			version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return 0, fmt.Errorf("pgstate: migrate: %w", err)
		}
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM kiln_schema_migrations`).Scan(&current); err != nil {
		return 0, fmt.Errorf("pgstate: migrate: %w", err)
	}
	if current > len(all) {
		return current, fmt.Errorf("pgstate: the database schema is at version %d, newer than this binary's %d: upgrade the binary", current, len(all))
	}
	for _, m := range all[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO kiln_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return current, fmt.Errorf("pgstate: migration %s: %w", m.name, err)
		}
		current = m.version
	}
	return current, nil
}

// errNotMigrated names the command that fixes it.
func errNotMigrated(current, want int) error {
	return fmt.Errorf("pgstate: the database schema is at version %d, this binary needs %d, and [state] migration is manual (--state-migrate=manual): run `state migrate` with a role that may create tables, then start again", current, want)
}

// checkSchema is Open's check under manual migration: the schema must be
// exactly this binary's newest version. It reads only, so a role with DML
// privileges alone can run it.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	current, err := SchemaVersion(ctx, pool)
	if err != nil {
		return err
	}
	switch {
	case current > len(all):
		return fmt.Errorf("pgstate: the database schema is at version %d, newer than this binary's %d: upgrade the binary", current, len(all))
	case current < len(all):
		return errNotMigrated(current, len(all))
	}
	return nil
}

// SchemaVersion is the newest migration applied to the database (0: none).
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('kiln_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("pgstate: schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var current int
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM kiln_schema_migrations`).Scan(&current); err != nil {
		return 0, fmt.Errorf("pgstate: schema version: %w", err)
	}
	return current, nil
}

// MigrateOnce connects with cfg, brings the schema to this binary's
// version and disconnects (`BIN state migrate`): from is the version it
// found, to the one it left.
func MigrateOnce(ctx context.Context, cfg Config) (from, to int, err error) {
	pc, err := poolConfig(cfg)
	if err != nil {
		return 0, 0, err
	}
	pc.MaxConns, pc.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return 0, 0, fmt.Errorf("pgstate: %w", err)
	}
	defer pool.Close()
	timeout := cfg.QueryTimeout
	if timeout <= 0 {
		timeout = defaultQueryTimeout
	}
	mctx, cancel := context.WithTimeout(ctx, 4*timeout) // another migrator's turn included
	defer cancel()
	if from, err = SchemaVersion(mctx, pool); err != nil {
		return 0, 0, err
	}
	to, err = Migrate(mctx, pool)
	return from, to, err
}
