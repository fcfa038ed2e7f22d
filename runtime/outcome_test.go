package runtime

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestOutcomeJSONIsStructJSON: the outcome's hand-assembled object is
// byte for byte what encoding/json writes for the struct of each status
// (the shape it had), and its indented form is what an indenting
// json.Encoder writes.
func TestOutcomeJSONIsStructJSON(t *testing.T) {
	resp := &HTTPResponse{Status: 201, ContentType: "application/json", Body: `{"a":"<b>"}`}
	cases := []struct {
		o    Outcome
		want any // the struct the outcome used to be encoded from
	}{
		{Outcome{Status: StatusCompleted, FinalValue: map[string]any{"x": json.Number("1.0"), "s": "a\u2028<b>"}, LastNode: "done"},
			struct {
				Status     string `json:"status"`
				FinalValue any    `json:"final_value"`
				LastNode   any    `json:"last_node"`
			}{StatusCompleted, map[string]any{"x": json.Number("1.0"), "s": "a\u2028<b>"}, "done"}},
		{Outcome{Status: StatusCompleted, FinalValue: []any{"a"}, HTTPResponse: resp},
			struct {
				Status       string        `json:"status"`
				FinalValue   any           `json:"final_value"`
				LastNode     any           `json:"last_node"`
				HTTPResponse *HTTPResponse `json:"http_response,omitempty"`
			}{StatusCompleted, []any{"a"}, nil, resp}},
		{Outcome{Status: StatusFailed, Reason: "bad \"input\"\n"},
			struct {
				Status   string `json:"status"`
				Reason   string `json:"reason"`
				LastNode any    `json:"last_node"`
			}{StatusFailed, "bad \"input\"\n", nil}},
		{Outcome{Status: StatusTimedOut, ElapsedMS: 12, LastNode: "x"},
			struct {
				Status    string `json:"status"`
				ElapsedMS int64  `json:"elapsed_ms"`
				LastNode  any    `json:"last_node"`
			}{StatusTimedOut, 12, "x"}},
		{Outcome{Status: StatusPaused, RunID: "r1", LastNode: "p", Reason: "ok?"},
			struct {
				Status   string `json:"status"`
				RunID    string `json:"run_id"`
				LastNode any    `json:"last_node"`
				Reason   string `json:"reason"`
			}{StatusPaused, "r1", "p", "ok?"}},
		{Outcome{Status: StatusErrored, Reason: "boom", LastNode: "n", Err: &Error{Class: "policy_denied"}},
			struct {
				Status     string `json:"status"`
				Error      string `json:"error"`
				ErrorClass string `json:"error_class,omitempty"`
				LastNode   any    `json:"last_node"`
			}{StatusErrored, "boom", "policy_denied", "n"}},
		{Outcome{Status: StatusErrored, Reason: "boom"},
			struct {
				Status   string `json:"status"`
				Error    string `json:"error"`
				LastNode any    `json:"last_node"`
			}{StatusErrored, "boom", nil}},
	}
	for _, c := range cases {
		want, err := EncodeJSON(c.want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodeJSON(&c.o)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("outcome %s (%v), want %s", got, err, want)
		}
		var indented bytes.Buffer
		enc := json.NewEncoder(&indented)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(&c.o); err != nil {
			t.Fatal(err)
		}
		got, err = EncodeJSONIndent(&c.o)
		if err != nil || !bytes.Equal(got, bytes.TrimRight(indented.Bytes(), "\n")) {
			t.Errorf("indented outcome %s (%v), want %s", got, err, indented.Bytes())
		}
	}
	if _, err := EncodeJSONIndent(&Outcome{Status: StatusCompleted, FinalValue: func() {}}); err == nil {
		t.Error("an outcome whose value does not encode must be an error")
	}
}
