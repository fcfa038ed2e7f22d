package spec

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func check(st *workflow.State, secrets ...string) []spec.Issue {
	wf := &workflow.Workflow{State: st}
	for _, s := range secrets {
		wf.Secrets = append(wf.Secrets, workflow.Secret{Name: s, Source: "env", Var: s})
	}
	return CheckState(wf, spec.ForWorkflow(wf))
}

// TestCheckState: the connection string never comes from the workflow
// (exactly one of dsn_secret and dsn_env), the host is declared, numbers
// are bounded, and the file backend takes no postgres key.
func TestCheckState(t *testing.T) {
	ok := workflow.State{Backend: Postgres, Host: "db.internal:6432", DSNSecret: "STATE_DSN"}
	if is := check(&ok, "STATE_DSN"); len(is) != 0 {
		t.Fatalf("valid block: %v", is)
	}
	for _, c := range []struct {
		st   workflow.State
		code string
		msg  string
	}{
		{workflow.State{Backend: "mysql"}, "invalid_state", `"mysql" must be file or postgres`},
		{workflow.State{Backend: File, Host: "db"}, "invalid_state", `are for backend = "postgres"`},
		{workflow.State{Backend: Postgres, DSNEnv: "KILN_STATE_DSN"}, "missing_field", "host is required"},
		{workflow.State{Backend: Postgres, Host: "postgres://u:p@db/x", DSNEnv: "D"}, "invalid_state", "must be host[:port]"},
		{workflow.State{Backend: Postgres, Host: "db:0", DSNEnv: "D"}, "invalid_state", "must be host[:port]"},
		{workflow.State{Backend: Postgres, Host: "/run/../etc", DSNEnv: "D"}, "invalid_state", "clean absolute"},
		{workflow.State{Backend: Postgres, Host: "db"}, "state_dsn_source", "never from the workflow"},
		{workflow.State{Backend: Postgres, Host: "db", DSNEnv: "D", DSNSecret: "STATE_DSN"}, "state_dsn_source", "not both"},
		{workflow.State{Backend: Postgres, Host: "db", DSNSecret: "NOPE"}, "unknown_secret", `"NOPE" is not declared`},
		{workflow.State{Backend: Postgres, Host: "db", DSNEnv: "not a var"}, "invalid_env_key", "not an environment variable name"},
		{workflow.State{Backend: Postgres, Host: "db", DSNEnv: "D", MaxConns: 101}, "out_of_range", "max_conns must be 1 to 100"},
		{workflow.State{Backend: Postgres, Host: "db", DSNEnv: "D", MinConns: 11}, "out_of_range", "min_conns must be 0 to max_conns (10)"},
		{workflow.State{Backend: Postgres, Host: "db", DSNEnv: "D", QueryTimeoutSecs: 61}, "out_of_range", "query_timeout_secs"},
		{workflow.State{Backend: Postgres, Host: "db", DSNEnv: "D", LeaseSecs: 1}, "out_of_range", "lease_secs must be 3 to 600"},
	} {
		is := check(&c.st, "STATE_DSN")
		found := false
		for _, i := range is {
			if i.Code == c.code && strings.Contains(i.Message, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%+v: got %v, want %s %q", c.st, is, c.code, c.msg)
		}
	}
}

// TestNeeds: the database host is a network need, the connection
// string's secret or variable a secret need; a socket directory is no
// network need; the file backend has none.
func TestNeeds(t *testing.T) {
	wf := &workflow.Workflow{State: &workflow.State{Backend: Postgres, Host: "DB.internal:6432", DSNEnv: "KILN_STATE_DSN"}}
	got := needs(wf)
	if len(got) != 2 || got[0].Kind != spec.NeedNetwork || got[0].Host != "db.internal" ||
		got[1].Kind != spec.NeedSecret || got[1].Key != "KILN_STATE_DSN" {
		t.Fatalf("needs: %+v", got)
	}
	wf.State.Host = "/run/postgresql"
	if got := needs(wf); len(got) != 1 || got[0].Kind != spec.NeedSecret {
		t.Fatalf("socket needs: %+v", got)
	}
	wf.State.Backend = File
	if got := needs(wf); len(got) != 0 {
		t.Fatalf("file backend needs: %+v", got)
	}
}
