package pgstate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	pgspec "github.com/kilnworks/kiln/capabilities/pgstate/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// readyKey is this family's reason in /readyz while the database is away.
const readyKey = "state"

// The values of --state-migrate.
const (
	migrateStartup = "startup" // Open applies the embedded migrations
	migrateManual  = "manual"  // `BIN state migrate` does; Open only checks
)

func init() {
	var store *Store
	var stopPing context.CancelFunc
	migrate := migrateStartup
	runtime.RegisterExtension(runtime.Extension{
		Name: "pgstate",
		Flags: func(fs *flag.FlagSet) {
			fs.Func("state-migrate", "`when` the state database's schema is migrated: startup (default; needs a role that may create tables) or manual (run `state migrate` first; serving needs DML only)", func(v string) error {
				if v != migrateStartup && v != migrateManual {
					return fmt.Errorf("want startup or manual")
				}
				migrate = v
				return nil
			})
		},
		Commands: []runtime.Command{{
			Name:    "state migrate",
			Summary: "apply the state database's embedded migrations, print the schema version and exit",
			Run: func(ctx context.Context, h *runtime.Host, stdout io.Writer) error {
				wf := h.Program.Workflow
				if !pgspec.Shared(wf) {
					return errors.New("this workflow keeps its state in files ([state] backend is not \"postgres\"): nothing to migrate")
				}
				cfg, err := ConfigFor(wf.State, h.Engine.Services)
				if err != nil {
					return err
				}
				from, to, err := MigrateOnce(ctx, cfg)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "state database schema at version %d (was %d)\n", to, from)
				return nil
			},
		}},
		Setup: func(ctx context.Context, h *runtime.Host) error {
			wf := h.Program.Workflow
			if !pgspec.Shared(wf) {
				return nil
			}
			if err := spec.Err(pgspec.CheckState(wf, spec.ForWorkflow(wf))); err != nil {
				return err
			}
			cfg, err := ConfigFor(wf.State, h.Engine.Services)
			if err != nil {
				return err
			}
			cfg.Workflow = wf.Name
			cfg.ManualMigrate = migrate == migrateManual
			store, err = Open(ctx, cfg)
			if err != nil {
				return err
			}
			if h.Engine.Services == nil {
				h.Engine.Services = &runtime.Services{}
			}
			runtime.SetClaimStore(h.Engine.Services, store)
			runtime.SetTickClaims(h.Engine.Services, store)
			runtime.SetCheckpointStore(h.Engine.Services, store)
			runtime.SetRunStore(h.Engine.Services, store)
			var pctx context.Context
			pctx, stopPing = context.WithCancel(context.Background())
			go watchReady(pctx, h, store)
			return nil
		},
		Close: func() error {
			if stopPing != nil {
				stopPing()
			}
			if store != nil {
				store.Close()
			}
			return nil
		},
	})
}

// ConfigFor reads the connection string from the secret or the variable
// [state] names and checks that it reaches the declared host, so a
// binary can never be pointed at a database its needs do not show.
func ConfigFor(st *workflow.State, svc *runtime.Services) (Config, error) {
	var dsn string
	var err error
	switch {
	case st.DSNSecret != "":
		if svc == nil || svc.Secret == nil {
			return Config{}, fmt.Errorf("[state] dsn_secret %q: no secret resolver", st.DSNSecret)
		}
		dsn, err = svc.Secret(st.DSNSecret)
		if err != nil {
			return Config{}, fmt.Errorf("[state] dsn_secret %q: %w", st.DSNSecret, err)
		}
	case st.DSNEnv != "":
		dsn = os.Getenv(st.DSNEnv)
	}
	if dsn == "" {
		return Config{}, fmt.Errorf("[state]: the connection string (%s) is empty", dsnSource(st))
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return Config{}, fmt.Errorf("[state]: the connection string (%s) does not parse", dsnSource(st))
	}
	host, port, _ := pgspec.HostPort(st.Host)
	bad := pc.Host != host || pc.Port != port
	for _, f := range pc.Fallbacks { // other hosts to try, or the same with other TLS settings
		bad = bad || f.Host != host || f.Port != port
	}
	if bad {
		return Config{}, fmt.Errorf("[state]: the connection string (%s) must reach exactly host %q port %d, as [state] host declares", dsnSource(st), host, port)
	}
	cfg := Config{DSN: dsn, MaxConns: int32(st.MaxConns), MinConns: int32(st.MinConns),
		QueryTimeout: time.Duration(st.QueryTimeoutSecs) * time.Second, Lease: time.Duration(st.LeaseSecs) * time.Second}
	return cfg, nil
}

func dsnSource(st *workflow.State) string {
	if st.DSNSecret != "" {
		return "secret " + st.DSNSecret
	}
	return "variable " + st.DSNEnv
}

// watchReady pings the database every few seconds: while it is away,
// /readyz fails (the load balancer routes elsewhere) and keyed routes,
// whose claims need it, answer errors instead of running unguarded.
func watchReady(ctx context.Context, h *runtime.Host, s *Store) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		if err := s.Ping(ctx); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
			h.BlockReady(readyKey, "the state database is unreachable")
		} else {
			h.UnblockReady(readyKey)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
