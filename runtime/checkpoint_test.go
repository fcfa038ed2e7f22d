package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// goodCheckpoint is a checkpoint of run id as kiln writes it, as a JSON
// object to take fields out of or change.
func goodCheckpoint(id, digest string) map[string]any {
	return map[string]any{
		"run_id": id, "workflow": "durable", "workflow_digest": digest, "start_node": "",
		"state": "paused", "reason": "approve p", "paused_at": "p", "next_node": "b",
		"trigger": map[string]any{"kind": "manual"}, "outputs": map[string]any{"a": map[string]any{"step": "a"}},
		"loops": map[string]any{},
	}
}

func writeRaw(t *testing.T, dir, id, text string) string {
	t.Helper()
	path := filepath.Join(dir, "runs", id+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func with(m map[string]any, key string, v any) string {
	c := map[string]any{}
	for k, e := range m {
		c[k] = e
	}
	if v == nil {
		delete(c, key)
	} else {
		c[key] = v
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// TestCheckpointDecodedStrictly: a file that is not a whole, valid
// checkpoint is refused on load and on listing, and every error names the
// file; nothing is listed with an empty run id.
func TestCheckpointDecodedStrictly(t *testing.T) {
	good := goodCheckpoint("r1", "dg")
	cases := []struct{ name, text, want string }{
		{"empty object", `{}`, "field run_id is missing or null"},
		{"null", `null`, "field run_id is missing or null"},
		{"empty file", ``, "EOF"},
		{"array", `[]`, "the checkpoint is a JSON array, want an object"},
		{"missing loops", with(good, "loops", nil), "field loops is missing or null"},
		{"missing next_node", with(good, "next_node", nil), "field next_node is missing or null"},
		{"missing start_node", with(good, "start_node", nil), "field start_node is missing or null"},
		{"null outputs", strings.Replace(with(good, "outputs", nil), "{", `{"outputs":null,`, 1), "field outputs is missing or null"},
		{"outputs not an object", with(good, "outputs", []any{1}), "field outputs is a JSON array, want an object"},
		{"trigger not an object", with(good, "trigger", "x"), "field trigger is a JSON string, want an object"},
		{"run id not a string", with(good, "run_id", 7), "field run_id is a JSON number, want a string"},
		{"loop count not an integer", with(good, "loops", map[string]any{"0": 1.5}), "want an integer"},
		{"unknown field", with(good, "extra", true), `unknown field "extra"`},
		{"bad run id", with(good, "run_id", "../r1"), `run_id "../r1" is not a valid run id`},
		{"empty run id", with(good, "run_id", ""), `run_id "" is not a valid run id`},
		{"run id of another file", with(good, "run_id", "r2"), `run_id "r2" does not match the file name`},
		{"unknown state", with(good, "state", "done"), `state "done"`},
		{"bad loop key", with(good, "loops", map[string]any{"x": 1}), `loops entry "x"`},
		{"negative loop count", with(good, "loops", map[string]any{"0": -1}), `loops entry "0"`},
		{"trailing data", with(good, "", nil) + ` {}`, "trailing data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeRaw(t, dir, "r1", c.text)
			_, err := LoadCheckpoint(dir, "r1")
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("load: %v; want %q naming %s", err, c.want, path)
			}
			list, bad, err := ListCheckpoints(dir)
			if err != nil || len(list) != 0 || len(bad) != 1 || !strings.Contains(bad[0].Error(), path) {
				t.Fatalf("list %+v bad %v err %v", list, bad, err)
			}
		})
	}
	// The good one itself loads, and lists beside a bad one.
	dir := t.TempDir()
	writeRaw(t, dir, "r1", with(good, "", nil))
	writeRaw(t, dir, "r9", `{}`)
	if cp, err := LoadCheckpoint(dir, "r1"); err != nil || cp.RunID != "r1" || cp.NextNode != "b" {
		t.Fatalf("good checkpoint: %+v %v", cp, err)
	}
	list, bad, err := ListCheckpoints(dir)
	if err != nil || len(list) != 1 || list[0].RunID != "r1" || len(bad) != 1 || !strings.Contains(bad[0].Error(), "r9.json") {
		t.Fatalf("list %+v bad %v err %v", list, bad, err)
	}
}

// TestCheckResumeNamesUnknownNodes: a checkpoint naming a start node, node
// or edge the workflow does not have is refused, naming the file, both by
// CheckResume and by the engine itself.
func TestCheckResumeNamesUnknownNodes(t *testing.T) {
	p := dProgram(t, "dg", []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step")}, chainEdges("a", "p", "b"))
	good := goodCheckpoint("r1", "dg")
	cases := []struct{ name, text, want string }{
		{"unknown start node", with(good, "start_node", "nope"), `unknown start node "nope"`},
		{"unknown next node", with(good, "next_node", "zz"), `unknown node "zz"`},
		{"unknown pause node", with(good, "paused_at", "zz"), `unknown node "zz"`},
		{"output of an unknown node", with(good, "outputs", map[string]any{"zz": 1}), `unknown node "zz"`},
		{"unknown edge", with(good, "loops", map[string]any{"7": 1}), `unknown edge "7"`},
		{"other workflow", with(good, "workflow_digest", "other"), "different workflow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeRaw(t, dir, "r1", c.text)
			cp, err := LoadCheckpoint(dir, "r1")
			if err != nil {
				t.Fatal(err)
			}
			err = p.CheckResume(cp)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckResume: %v; want %q naming %s", err, c.want, path)
			}
			rep := (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{Resume: cp})
			if rep.Outcome.Status != StatusErrored || !strings.Contains(rep.Outcome.Reason, c.want) {
				t.Fatalf("resume: %+v", rep.Outcome)
			}
		})
	}
	dir := t.TempDir()
	writeRaw(t, dir, "r1", with(good, "", nil))
	cp, _ := LoadCheckpoint(dir, "r1")
	if err := p.CheckResume(cp); err != nil {
		t.Fatalf("good checkpoint refused: %v", err)
	}
}

// TestCheckpointRedactsDataKeepsIdentifiers: a checkpoint is a sink: the
// outputs, trigger and reason it saves are redacted (a resumed run sees
// [REDACTED] there), while the run id, digest and node ids are kept, so
// it stays resumable under a short secret. The run's own data is not
// touched.
func TestCheckpointRedactsDataKeepsIdentifiers(t *testing.T) {
	isolateSecrets(t)
	dReset()
	RedactValue("up") // short: it occurs in the run id, digest and node ids too
	dir := t.TempDir()
	p := dProgram(t, "digest-up", []workflow.Node{dNode("up1", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step")},
		chainEdges("up1", "p", "b"))
	trigger := MakeTrigger("manual", map[string]any{"secret": "up", "state": "going up"})
	rep := (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{ExecutionID: "run-up", Trigger: trigger})
	if rep.Outcome.Status != StatusPaused {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if trigger["secret"] != "up" || rep.Trace.Entries[0].Output.(map[string]any)["secret"] != "up" {
		t.Fatal("run data was redacted")
	}
	data, err := os.ReadFile(filepath.Join(dir, "runs", "run-up.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatalf("checkpoint is not JSON:\n%s", data)
	}
	cp, err := LoadCheckpoint(dir, "run-up")
	if err != nil {
		t.Fatalf("checkpoint under a short secret not loadable: %v\n%s", err, data)
	}
	if cp.RunID != "run-up" || cp.WorkflowDigest != "digest-up" || cp.PausedAt != "p" || cp.NextNode != "b" {
		t.Fatalf("identifiers changed: %+v", cp)
	}
	if cp.Trigger["secret"] != RedactedMarker || cp.Trigger["state"] != "going [REDACTED]" ||
		cp.Outputs["up1"].(map[string]any)["secret"] != RedactedMarker {
		t.Fatalf("data not redacted:\n%s", data)
	}
	rep = (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusCompleted {
		t.Fatalf("resume %+v", rep.Outcome)
	}
	if got := rep.Trace.Entries[len(rep.Trace.Entries)-1].Output.(map[string]any)["secret"]; got != RedactedMarker {
		t.Fatalf("resumed run sees %v, want %s", got, RedactedMarker)
	}
}
