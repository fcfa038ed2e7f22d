package llm_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"

	_ "github.com/kilnworks/kiln/capabilities/data"
)

// The classifier example runs end to end through the shared CLI (the
// extension's flags and Setup) against its intel-mock script.
func TestClassifierExampleWithIntelMock(t *testing.T) {
	script, err := mock.LoadScript("../../examples/classifier/intel-mock.toml")
	if err != nil {
		t.Fatal(err)
	}
	srv, sock := startMock(t, script)
	wf, err := gen.Load("../../examples/classifier/workflow.toml", gen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "input.json")
	os.WriteFile(input, []byte(`{"text": "The update broke my build again."}`), 0o644)
	record := filepath.Join(dir, "record.json")
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"--intel-unix", sock, "--intel-route-all", "--input", input, "--record", record, "--quiet"},
		cli.Options{Prog: "kiln", Workflow: wf, Stdout: &stdout, Stderr: &stderr, Env: func(string) string { return "" }})
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	var out struct {
		Status     string `json:"status"`
		FinalValue any    `json:"final_value"`
		LastNode   string `json:"last_node"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("stdout: %s", stdout.String())
	}
	if out.LastNode != "escalate" || !strings.Contains(stdout.String(), "ESCALATE (0.92): the update broke their build") {
		t.Fatalf("outcome = %s", stdout.String())
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Cost map[string]int64 `json:"cost"`
	}
	json.Unmarshal(data, &rec)
	if rec.Cost["llm_calls"] != 2 || rec.Cost["llm_tokens"] != 64+8+151+24 || srv.Calls() != 2 {
		t.Fatalf("cost = %v, calls = %d", rec.Cost, srv.Calls())
	}
}

func TestCLIWithoutTransportErrors(t *testing.T) {
	wf, err := gen.Decode("wf.toml", []byte(classify))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"--quiet"}, cli.Options{Prog: "kiln", Workflow: wf, Stdout: &stdout, Stderr: &stderr,
		Env: func(string) string { return "" }})
	if code != cli.ExitFailed || !strings.Contains(stderr.String(), `backend "default" is not configured`) {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	// A broken flag combination is a usage error before anything runs.
	code = cli.Main([]string{"--quiet", "--intel-unix", "/tmp/a.sock", "--intel-http", "http://127.0.0.1:9/"},
		cli.Options{Prog: "kiln", Workflow: wf, Stdout: &stdout, Stderr: &stderr, Env: func(string) string { return "" }})
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "set twice") {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}
