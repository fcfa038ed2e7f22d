package pgstate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/pgstate/pgtest"
	pgspec "github.com/kilnworks/kiln/capabilities/pgstate/spec"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestConfigForBindsTheDeclaredHost: the connection string comes from the
// named secret or variable and must reach exactly the host [state]
// declares (the network need the operator approved); a string naming any
// other host, port or a fallback host is refused without being quoted.
func TestConfigForBindsTheDeclaredHost(t *testing.T) {
	secrets := map[string]string{
		"OK":    "postgres://kiln:pw-secret@db.internal:6432/app",
		"OTHER": "postgres://kiln:pw-secret@evil.example:6432/app",
		"PORT":  "postgres://kiln:pw-secret@db.internal:5432/app",
		"NOTLS": "postgres://kiln:pw-secret@evil.example:6432/app?sslmode=disable", // no TLS fallback entries

		"FALLBACK": "host=db.internal,evil.example port=6432,6432 user=kiln password=pw-secret",
		"EMPTY":    "",
	}
	svc := &runtime.Services{Secret: func(n string) (string, error) {
		v, ok := secrets[n]
		if !ok {
			return "", errors.New("no such secret")
		}
		return v, nil
	}}
	st := func(secret string) *workflow.State {
		return &workflow.State{Backend: pgspec.Postgres, Host: "db.internal:6432", DSNSecret: secret, MaxConns: 4, LeaseSecs: 9}
	}
	cfg, err := ConfigFor(st("OK"), svc)
	if err != nil || cfg.MaxConns != 4 || cfg.Lease != 9*time.Second {
		t.Fatalf("OK: %+v %v", cfg, err)
	}
	for _, name := range []string{"OTHER", "PORT", "NOTLS", "FALLBACK", "EMPTY", "MISSING"} {
		_, err := ConfigFor(st(name), svc)
		if err == nil || strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	t.Setenv("KILN_TEST_STATE_DSN", secrets["OK"])
	if _, err := ConfigFor(&workflow.State{Backend: pgspec.Postgres, Host: "db.internal:6432", DSNEnv: "KILN_TEST_STATE_DSN"}, nil); err != nil {
		t.Fatalf("dsn_env: %v", err)
	}
}

// TestExtensionSharesClaimsAndReportsReadiness: a workflow with [state]
// backend = "postgres" gets the shared store through the extension (its
// keyed route's claims land in the database; it is the checkpoint and
// run store too), and /readyz's reason
// appears while the database is away and clears when it is back.
func TestExtensionSharesClaimsAndReportsReadiness(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cluster := pgtest.Running(t)
	t.Setenv("KILN_TEST_STATE_DSN", dsn)
	src := replicaWorkflow + `
[state]
backend = "postgres"
host = "` + cluster.Dir + `"
dsn_env = "KILN_TEST_STATE_DSN"
lease_secs = 3
`
	wf, err := gen.Decode("workflow.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &runtime.Host{Program: p, Engine: &runtime.Engine{Services: &runtime.Services{}}}
	var ext runtime.Extension
	for _, e := range runtime.Extensions() {
		if e.Name == "pgstate" {
			ext = e
		}
	}
	if err := ext.Setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	store, ok := runtime.ClaimStoreFor(h.Engine).(*Store)
	if !ok {
		t.Fatal("the extension did not install the shared store")
	}
	if cs, _ := runtime.CheckpointStoreFor(h.Engine).(*Store); cs != store {
		t.Fatal("the extension did not install the shared checkpoint store")
	}
	if rs, _ := runtime.RunStoreFor(h.Engine).(*Store); rs != store {
		t.Fatal("the extension did not install the shared run store")
	}
	if c, err := store.Begin(context.Background(), "POST /hook", "x"); err != nil || c.Outcome != runtime.ClaimRun {
		t.Fatalf("%+v %v", c, err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_claims`); n != 1 {
		t.Fatalf("%d claims in the database", n)
	}

	waitReady := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if ready, _ := h.Ready(); ready == want {
				return
			}
			if time.Now().After(deadline) {
				_, why := h.Ready()
				t.Fatalf("ready never became %v: %v", want, why)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitReady(true)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = cluster.Start()
		}
	}()
	waitReady(false)
	if _, err := store.Begin(context.Background(), "POST /hook", "y"); err == nil {
		t.Fatal("a claim was granted with the database away")
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitReady(true)
	// The pool reconnects by itself: no restart of the replica.
	if c, err := store.Begin(context.Background(), "POST /hook", "x"); err != nil || c.Outcome != runtime.ClaimInFlight {
		t.Fatalf("after the database came back, the committed claim: %+v %v", c, err)
	}
}
