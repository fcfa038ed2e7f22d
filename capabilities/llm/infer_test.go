package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/runtime"
)

const classify = `
name = "classify"
[[nodes]]
id = "classify"
type = "llm_infer"
backend = "default"
prompt = "Classify the sentiment of: {{text}} (asked by {{trigger.user}}, ticket {{ticket.id}})"
input_from = "trigger"
`

func TestInferPromptUsageAndOutput(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("positive", 12, 1)}})
	p := compile(t, classify, nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, map[string]any{"text": "I love it", "user": "ada"})
	wantStatus(t, r, runtime.StatusCompleted)
	out := output(t, r, "classify")
	if out["content"] != "positive" || out["parsed"] != nil {
		t.Fatalf("output = %v", out)
	}
	usage := out["usage"].(map[string]any)
	if usage["prompt_tokens"] != json.Number("12") || usage["completion_tokens"] != json.Number("1") {
		t.Fatalf("usage = %v", usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Role != "user" {
		t.Fatalf("requests = %+v", reqs)
	}
	// {{text}} from input_from, {{trigger.user}} through the whole-context
	// fallback, an unresolved marker left as written.
	if got := reqs[0].Messages[0].Content; got != "Classify the sentiment of: I love it (asked by ada, ticket {{ticket.id}})" {
		t.Fatalf("prompt = %q", got)
	}
	if reqs[0].MaxTokens != 1024 || reqs[0].Model != "default" {
		t.Fatalf("wire defaults: %+v", reqs[0])
	}
	cost := r.Counters.Snapshot()
	if cost["llm_calls"] != 1 || cost["llm_tokens"] != 13 {
		t.Fatalf("cost = %v", cost)
	}
	if r.Outcome.FinalValue.(map[string]any)["content"] != "positive" {
		t.Fatalf("final value = %v", r.Outcome.FinalValue)
	}
}

func TestInferPromptFileAndMaxTokens(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("ok", 1, 1)}})
	p := compile(t, `
name = "pf"
[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt_file = "prompts/ask.txt"
max_tokens = 77
`, map[string][]byte{"prompts/ask.txt": []byte("Say hi to {{trigger.name}}.")})
	e, _ := engineFor(t, p, sock)
	wantStatus(t, runOnce(t, e, p, map[string]any{"name": "Lin"}), runtime.StatusCompleted)
	req := srv.Requests()[0]
	if req.Messages[0].Content != "Say hi to Lin." || req.MaxTokens != 77 {
		t.Fatalf("request = %+v", req)
	}
	if _, err := tryCompile(`
name = "pf"
[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt_file = "prompts/missing.txt"
`, nil); err == nil || !strings.Contains(err.Error(), "node ask (llm_infer)") || !strings.Contains(err.Error(), "prompts/missing.txt") {
		t.Fatalf("missing prompt file: %v", err)
	}
}

const labelSchema = `{
  "type": "object",
  "required": ["label", "score"],
  "properties": {
    "label": {"enum": ["pos", "neg"]},
    "score": {"type": "number", "minimum": 0, "maximum": 1}
  },
  "additionalProperties": false
}`

func schemaWorkflow(repairs int) string {
	return `
name = "schema"
[[nodes]]
id = "judge"
type = "llm_infer"
backend = "default"
prompt = "Judge: {{trigger.text}}"
output_schema = "schemas/label.json"
output_repairs = ` + string(rune('0'+repairs)) + `
`
}

var schemaAssets = map[string][]byte{"schemas/label.json": []byte(labelSchema)}

func TestSchemaValid(t *testing.T) {
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn(`{"label":"pos","score":0.9}`, 10, 5)}})
	p := compile(t, schemaWorkflow(0), schemaAssets)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, map[string]any{"text": "great"})
	wantStatus(t, r, runtime.StatusCompleted)
	parsed := output(t, r, "judge")["parsed"].(map[string]any)
	if parsed["label"] != "pos" || parsed["score"] != json.Number("0.9") {
		t.Fatalf("parsed = %v", parsed)
	}
}

func TestSchemaInvalidThenRepaired(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"label":"meh","score":2}`, 10, 5),
		turn(`{"label":"neg","score":0.2}`, 30, 5),
	}})
	p := compile(t, schemaWorkflow(1), schemaAssets)
	e, audit := engineFor(t, p, sock)
	r := runOnce(t, e, p, map[string]any{"text": "bad"})
	wantStatus(t, r, runtime.StatusCompleted)
	out := output(t, r, "judge")
	if out["parsed"].(map[string]any)["label"] != "neg" || out["content"] != `{"label":"neg","score":0.2}` {
		t.Fatalf("output = %v", out)
	}
	// Usage covers both rounds; both are billed.
	if u := out["usage"].(map[string]any); u["prompt_tokens"] != json.Number("40") || u["completion_tokens"] != json.Number("10") {
		t.Fatalf("usage = %v", u)
	}
	if cost := r.Counters.Snapshot(); cost["llm_calls"] != 2 || cost["llm_tokens"] != 50 {
		t.Fatalf("cost = %v", cost)
	}
	// The repair round carries the rejected answer and what was wrong.
	second := srv.Requests()[1].Messages
	if len(second) != 3 || second[1].Role != "assistant" || second[1].Content != `{"label":"meh","score":2}` || second[2].Role != "user" {
		t.Fatalf("repair conversation = %+v", second)
	}
	for _, want := range []string{"does not match output_schema schemas/label.json", "/label", "/score", `"enum"`} {
		if !strings.Contains(second[2].Content, want) {
			t.Errorf("corrective message lacks %q:\n%s", want, second[2].Content)
		}
	}
	if !strings.Contains(audit.String(), `"msg":"llm_infer.repair"`) {
		t.Errorf("no llm_infer.repair audit event:\n%s", audit)
	}
}

func TestSchemaNeverValidErrorsAfterNPlus1(t *testing.T) {
	bad := turn(`{"label":"meh","score":0.5}`, 8, 4)
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{bad, bad, bad, bad}})
	p := compile(t, schemaWorkflow(2), schemaAssets)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, map[string]any{"text": "x"})
	wantStatus(t, r, runtime.StatusErrored, "node judge (llm_infer)", "does not match output_schema", "after 3 attempt(s)")
	if r.Outcome.Err.Class != runtime.ClassSchema {
		t.Fatalf("class = %s", r.Outcome.Err.Class)
	}
	if srv.Calls() != 3 {
		t.Fatalf("calls = %d, want N+1 = 3", srv.Calls())
	}
	if cost := r.Counters.Snapshot(); cost["llm_calls"] != 3 || cost["llm_tokens"] != 36 {
		t.Fatalf("tokens not billed: %v", cost)
	}
}

func TestSchemaErrorIsNeverRetried(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("nope", 1, 1), turn(`{"label":"pos","score":1}`, 1, 1)}})
	p := compile(t, schemaWorkflow(0)+`
[nodes.retry]
max_attempts = 3
on = "any"
`, schemaAssets)
	e, _ := engineFor(t, p, sock)
	wantStatus(t, runOnce(t, e, p, nil), runtime.StatusErrored, "JSON")
	if srv.Calls() != 1 {
		t.Fatalf("a schema failure was retried: %d calls", srv.Calls())
	}
}

func TestProseWhereJSONRequired(t *testing.T) {
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("Sure! The sentiment is positive.", 5, 7)}})
	p := compile(t, `
name = "inline"
[[nodes]]
id = "extract"
type = "llm_infer"
backend = "default"
prompt = "Give JSON"
output_schema = "inline"
`, nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusErrored, "node extract (llm_infer)", "not valid JSON")
	if r.Outcome.Err.Class != runtime.ClassSchema {
		t.Fatalf("class = %s", r.Outcome.Err.Class)
	}
}

func TestInlineAcceptsAnyJSON(t *testing.T) {
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn(" [1, 2.0, \"x\"]\n", 5, 7)}})
	p := compile(t, `
name = "inline"
[[nodes]]
id = "extract"
type = "llm_infer"
backend = "default"
prompt = "Give JSON"
output_schema = "inline"
`, nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	parsed := output(t, r, "extract")["parsed"].([]any)
	if len(parsed) != 3 || parsed[1] != json.Number("2.0") {
		t.Fatalf("parsed = %v", parsed)
	}
}

func TestSchemaLoadErrors(t *testing.T) {
	cases := []struct {
		name   string
		assets map[string][]byte
		want   []string
	}{
		{"missing schema file", nil, []string{"node judge (llm_infer)", `output_schema "schemas/label.json" was not loaded`}},
		{"remote ref", map[string][]byte{"schemas/label.json": []byte(`{"$ref": "https://schemas.example.com/label.json"}`)},
			[]string{"refused", "https://schemas.example.com/label.json"}},
		{"relative file ref", map[string][]byte{"schemas/label.json": []byte(`{"properties": {"a": {"$ref": "common.json#/x"}}}`)},
			[]string{"refused", "common.json"}},
		{"file URL ref", map[string][]byte{"schemas/label.json": []byte(`{"$ref": "file:///etc/passwd"}`)},
			[]string{"refused", "file:///etc/passwd"}},
		{"remote $id base", map[string][]byte{"schemas/label.json": []byte(`{"$id": "http://evil.example/s.json", "$ref": "other.json"}`)},
			[]string{"refused", "http://evil.example/other.json"}},
		{"not JSON", map[string][]byte{"schemas/label.json": []byte(`type: object`)}, []string{"not valid JSON"}},
		{"not a schema", map[string][]byte{"schemas/label.json": []byte(`{"type": 12}`)}, []string{"output_schema"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tryCompile(schemaWorkflow(0), tc.assets)
			if err == nil {
				t.Fatal("compiled; want a load error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A $ref inside the document is fine.
	local := map[string][]byte{"schemas/label.json": []byte(`{"$defs": {"l": {"enum": ["pos"]}}, "properties": {"label": {"$ref": "#/$defs/l"}}}`)}
	if _, err := tryCompile(schemaWorkflow(0), local); err != nil {
		t.Fatalf("local $ref refused: %v", err)
	}
}

func TestBudgetStopsRunAndNextRunIsFresh(t *testing.T) {
	var turns []mock.Turn
	for i := 0; i < 6; i++ {
		turns = append(turns, turn("ok", 10, 5))
	}
	srv, sock := startMock(t, &mock.Script{Turns: turns})
	p := compile(t, `
name = "budget"
[budget]
max_llm_tokens = 20
[[nodes]]
id = "a"
type = "llm_infer"
backend = "default"
prompt = "one"
[[nodes]]
id = "b"
type = "llm_infer"
backend = "default"
prompt = "two"
[[nodes]]
id = "c"
type = "llm_infer"
backend = "default"
prompt = "three"
[[edges]]
from = "a"
to = "b"
[[edges]]
from = "b"
to = "c"
`, nil)
	e, _ := engineFor(t, p, sock)
	for run := 1; run <= 2; run++ {
		r := runOnce(t, e, p, nil)
		// a spends 15 of 20; b's call goes out (15 < 20) and spends 30 > 20.
		wantStatus(t, r, runtime.StatusErrored, "node b (llm_infer)", "max_llm_tokens 20")
		if r.Outcome.Err.Class != runtime.ClassBudget {
			t.Fatalf("class = %s", r.Outcome.Err.Class)
		}
		if got := r.Trace.Path(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
			t.Fatalf("run %d path = %v", run, got)
		}
		if cost := r.Counters.Snapshot(); cost["llm_tokens"] != 30 || cost["llm_calls"] != 2 {
			t.Fatalf("run %d cost = %v (the budget must start fresh)", run, cost)
		}
		if srv.Calls() != 2*run {
			t.Fatalf("after run %d: %d calls", run, srv.Calls())
		}
	}
}

func TestBudgetCheckedBeforeTheCall(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("ok", 10, 5), turn("ok", 10, 5)}})
	p := compile(t, `
name = "budget"
[budget]
max_llm_tokens = 15
[[nodes]]
id = "a"
type = "llm_infer"
backend = "default"
prompt = "one"
[[nodes]]
id = "b"
type = "llm_infer"
backend = "default"
prompt = "two"
[[edges]]
from = "a"
to = "b"
`, nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusErrored, "node b (llm_infer)", "exhausted")
	if srv.Calls() != 1 {
		t.Fatalf("b called the backend with the budget spent: %d calls", srv.Calls())
	}
}

func TestTransportFaultRetriedAndUnbilled(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{FailOnCall: 1, Turns: []mock.Turn{turn("fine", 3, 2)}})
	p := compile(t, `
name = "retry"
[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt = "q"
[nodes.retry]
max_attempts = 2
backoff_ms = 1
on = "transient"
`, nil)
	e, audit := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	if srv.Calls() != 2 || !strings.Contains(audit.String(), "node.retry") {
		t.Fatalf("calls = %d; audit:\n%s", srv.Calls(), audit)
	}
	if cost := r.Counters.Snapshot(); cost["llm_calls"] != 1 || cost["llm_tokens"] != 5 {
		t.Fatalf("the failed call was billed: %v", cost)
	}
}

func TestTransportFaultNamesNodeAndKind(t *testing.T) {
	p := compile(t, classify, nil)
	e, _ := engineFor(t, p, "/nonexistent/kiln-intel.sock")
	r := runOnce(t, e, p, map[string]any{"text": "x"})
	wantStatus(t, r, runtime.StatusErrored, "node classify (llm_infer)", `backend "default"`, "transport fault")
	if r.Outcome.Err.Class != runtime.ClassIntelligence {
		t.Fatalf("class = %s", r.Outcome.Err.Class)
	}
}

func TestSlowBackendHitsRunDeadline(t *testing.T) {
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{{Content: "late", DelayMS: 5000}}})
	p := compile(t, classify, nil)
	e, _ := engineFor(t, p, sock)
	start := time.Now()
	r := e.Run(context.Background(), p, runtime.RunOptions{Timeout: 300 * time.Millisecond})
	wantStatus(t, r, runtime.StatusTimedOut)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("run took %v past a 300ms deadline", d)
	}
	if r.Counters.Snapshot()["llm_calls"] != 0 {
		t.Fatal("an unanswered call was billed")
	}
}

func TestInferDryRun(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("x", 1, 1)}})
	p := compile(t, classify, nil)
	e, _ := engineFor(t, p, sock)
	r := e.Run(context.Background(), p, runtime.RunOptions{DryRun: true})
	wantStatus(t, r, runtime.StatusCompleted)
	out := output(t, r, "classify")
	if out["content"] != "<dry-run>" || out["dry_run"] != true || srv.Calls() != 0 {
		t.Fatalf("output = %v, calls = %d", out, srv.Calls())
	}
}

func TestUnconfiguredBackends(t *testing.T) {
	p := compile(t, classify, nil)
	e, _ := engineFor(t, p, "")
	wantStatus(t, runOnce(t, e, p, nil), runtime.StatusErrored, "node classify (llm_infer)", `backend "default" is not configured`, "--intel-unix")
	// A backend the workflow does not declare is refused at load, with the
	// generator's message.
	if _, err := tryCompile(strings.Replace(classify, `backend = "default"`, `backend = "fast"`, 1), nil); err == nil ||
		!strings.Contains(err.Error(), `node classify (llm_infer): backend "fast" is not declared in [[intelligence.backends]]`) {
		t.Fatalf("undeclared backend: %v", err)
	}
}
