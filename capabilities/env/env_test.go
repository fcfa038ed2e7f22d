package env

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func readEnv(t *testing.T, key string, pol *workflow.Policy) *runtime.Report {
	t.Helper()
	p, err := runtime.Compile(&workflow.Workflow{Name: "t", Policy: pol,
		Nodes: []workflow.Node{{ID: "token", Type: "read_env", Key: key}}}, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return (&runtime.Engine{}).Run(context.Background(), p, runtime.RunOptions{})
}

func encode(v any) string {
	b, _ := runtime.EncodeJSON(v)
	return string(b)
}

func TestReadEnv(t *testing.T) {
	t.Setenv("KILN_ENV_TEST_SET", "value <1>")
	t.Setenv("KILN_ENV_TEST_EMPTY", "")
	pol := &workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"KILN_ENV_TEST_*"}}}

	r := readEnv(t, "KILN_ENV_TEST_SET", pol)
	if got := encode(r.Outcome.FinalValue); got != `{"key":"KILN_ENV_TEST_SET","value":"value <1>"}` {
		t.Fatalf("set: %s (%s)", got, r.Outcome.Reason)
	}
	// Set but empty is set.
	r = readEnv(t, "KILN_ENV_TEST_EMPTY", pol)
	if got := encode(r.Outcome.FinalValue); got != `{"key":"KILN_ENV_TEST_EMPTY","value":""}` {
		t.Fatalf("empty: %s", got)
	}
	r = readEnv(t, "KILN_ENV_TEST_UNSET_XYZ", pol)
	if got := encode(r.Outcome.FinalValue); got != `{"key":"KILN_ENV_TEST_UNSET_XYZ","missing":true,"value":null}` {
		t.Fatalf("unset: %s", got)
	}
	// No [policy]: allow all.
	if r := readEnv(t, "KILN_ENV_TEST_SET", nil); r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("allow-all: %+v", r.Outcome)
	}
}

func TestReadEnvDenied(t *testing.T) {
	t.Setenv("HOME_SECRET_FOR_TEST", "x")
	for name, pol := range map[string]*workflow.Policy{
		"not listed":     {Env: &workflow.EnvPolicy{ReadKeys: []string{"OTHER"}}},
		"family missing": {FS: &workflow.FSPolicy{}},
	} {
		r := readEnv(t, "HOME_SECRET_FOR_TEST", pol)
		if r.Outcome.Status != runtime.StatusErrored || r.Counters.PolicyDenials.Load() != 1 ||
			!strings.Contains(r.Outcome.Reason, "node token (read_env): env.read denied on HOME_SECRET_FOR_TEST") {
			t.Errorf("%s: %+v", name, r.Outcome)
		}
	}
	// The engine-level override (fixtures, approvals) replaces the workflow's policy.
	p, _ := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "token", Type: "read_env", Key: "HOME_SECRET_FOR_TEST"}}}, runtime.CompileOptions{})
	e := &runtime.Engine{Policy: policy.New(&workflow.Policy{Env: &workflow.EnvPolicy{}})}
	if r := e.Run(context.Background(), p, runtime.RunOptions{}); r.Outcome.Status != runtime.StatusErrored {
		t.Fatalf("override: %+v", r.Outcome)
	}
	_, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "token", Type: "read_env"}}}, runtime.CompileOptions{})
	if err == nil || !strings.Contains(err.Error(), "node token (read_env): key is required") {
		t.Fatalf("missing key: %v", err)
	}
}
