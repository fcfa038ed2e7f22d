package runtime

import (
	"encoding/json"
	"sync/atomic"
)

// Run statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusPaused    = "paused"
	StatusErrored   = "errored"
)

// HTTPResponse is the reply a respond node declared.
type HTTPResponse struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Body        string `json:"body"`
}

// Outcome is how a run ended (docs/durable-runs.md).
type Outcome struct {
	Status       string
	FinalValue   any
	LastNode     string // "" = null
	Reason       string
	ElapsedMS    int64
	RunID        string
	HTTPResponse *HTTPResponse
	// Err is set when Status is errored.
	Err *Error
}

// MarshalJSON renders the outcome in the wire shape of its status, its
// fields in the documented order (status first), so people reading the
// output see the verdict before the details. The object is assembled here,
// each value encoded on its own: a struct's encoder is built by reflection
// on first use, which every one-shot binary would pay before printing.
func (o *Outcome) MarshalJSON() ([]byte, error) {
	var last any
	if o.LastNode != "" {
		last = o.LastNode
	}
	var kv []any // keys and values, alternating
	switch o.Status {
	case StatusCompleted:
		kv = []any{"status", o.Status, "final_value", o.FinalValue, "last_node", last}
		if o.HTTPResponse != nil {
			kv = append(kv, "http_response", o.HTTPResponse)
		}
	case StatusFailed:
		kv = []any{"status", o.Status, "reason", o.Reason, "last_node", last}
	case StatusTimedOut:
		kv = []any{"status", o.Status, "elapsed_ms", o.ElapsedMS, "last_node", last}
	case StatusPaused:
		kv = []any{"status", o.Status, "run_id", o.RunID, "last_node", last, "reason", o.Reason}
	default:
		kv = []any{"status", o.Status, "error", o.Reason}
		if o.Err != nil && o.Err.Class != "" {
			kv = append(kv, "error_class", string(o.Err.Class))
		}
		kv = append(kv, "last_node", last)
	}
	b := []byte{'{'}
	for i := 0; i < len(kv); i += 2 {
		v, err := EncodeJSON(kv[i+1])
		if err != nil {
			return nil, err
		}
		b = append(append(append(append(b, '"'), kv[i].(string)...), '"', ':'), v...)
		b = append(b, ',')
	}
	b[len(b)-1] = '}'
	return b, nil
}

// TraceEntry is one executed node.
type TraceEntry struct {
	NodeID    string `json:"node_id"`
	Kind      string `json:"kind"`
	Outcome   string `json:"outcome"` // continue | terminate | fail | pause | error
	Branch    any    `json:"branch"`  // string or null
	Output    any    `json:"output"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// Trace is the ordered path of a run.
type Trace struct {
	ExecutionID string       `json:"execution_id"`
	Entries     []TraceEntry `json:"entries"`
}

// Path returns the node ids of the trace in order.
func (t *Trace) Path() []string {
	out := make([]string, len(t.Entries))
	for i, e := range t.Entries {
		out[i] = e.NodeID
	}
	return out
}

// Counters are the per-run cost counters; child runs (call, parallel, map)
// add to their parent's counters. Safe for concurrent use.
type Counters struct {
	WorkflowStarts      atomic.Int64
	WorkflowCompletions atomic.Int64
	WorkflowFailures    atomic.Int64
	WorkflowTimeouts    atomic.Int64
	WorkflowErrored     atomic.Int64
	WorkflowPaused      atomic.Int64
	NodeExecutions      atomic.Int64
	NodeFailures        atomic.Int64
	PolicyDenials       atomic.Int64
	LLMCalls            atomic.Int64
	LLMTokens           atomic.Int64
}

// Snapshot returns the counters as the record's "cost" object.
func (c *Counters) Snapshot() map[string]int64 {
	return map[string]int64{
		"workflow_starts":      c.WorkflowStarts.Load(),
		"workflow_completions": c.WorkflowCompletions.Load(),
		"workflow_failures":    c.WorkflowFailures.Load(),
		"workflow_timeouts":    c.WorkflowTimeouts.Load(),
		"workflow_errored":     c.WorkflowErrored.Load(),
		"node_executions":      c.NodeExecutions.Load(),
		"node_failures":        c.NodeFailures.Load(),
		"policy_denials":       c.PolicyDenials.Load(),
		"llm_calls":            c.LLMCalls.Load(),
		"llm_tokens":           c.LLMTokens.Load(),
	}
}

// Report is everything a finished run produced.
type Report struct {
	Workflow    string
	StartNode   string
	ExecutionID string
	Outcome     *Outcome
	Trace       *Trace
	Counters    *Counters
	WallMS      int64
}

// Record renders the run record of `--record PATH` (docs/durable-runs.md),
// its fields (and the cost counters) in the order the format lists them,
// like the outcome itself.
func (r *Report) Record() ([]byte, error) {
	var last any
	if r.Outcome.LastNode != "" {
		last = r.Outcome.LastNode
	}
	detail, err := EncodeJSON(r.Outcome)
	if err != nil {
		return nil, err
	}
	c := r.Counters
	return EncodeJSONIndent(struct {
		Workflow    string          `json:"workflow"`
		StartNode   string          `json:"start_node"`
		ExecutionID string          `json:"execution_id"`
		Status      string          `json:"status"`
		LastNode    any             `json:"last_node"`
		Detail      json.RawMessage `json:"detail"`
		WallMS      int64           `json:"wall_ms"`
		Cost        recordCost      `json:"cost"`
		Trace       *Trace          `json:"trace"`
	}{r.Workflow, r.StartNode, r.ExecutionID, r.Outcome.Status, last, detail, r.WallMS, recordCost{
		c.WorkflowStarts.Load(), c.WorkflowCompletions.Load(), c.WorkflowFailures.Load(),
		c.WorkflowTimeouts.Load(), c.WorkflowErrored.Load(), c.NodeExecutions.Load(), c.NodeFailures.Load(),
		c.PolicyDenials.Load(), c.LLMCalls.Load(), c.LLMTokens.Load(),
	}, r.Trace})
}

// recordCost is the record's "cost" object (the keys of Snapshot).
type recordCost struct {
	WorkflowStarts      int64 `json:"workflow_starts"`
	WorkflowCompletions int64 `json:"workflow_completions"`
	WorkflowFailures    int64 `json:"workflow_failures"`
	WorkflowTimeouts    int64 `json:"workflow_timeouts"`
	WorkflowErrored     int64 `json:"workflow_errored"`
	NodeExecutions      int64 `json:"node_executions"`
	NodeFailures        int64 `json:"node_failures"`
	PolicyDenials       int64 `json:"policy_denials"`
	LLMCalls            int64 `json:"llm_calls"`
	LLMTokens           int64 `json:"llm_tokens"`
}
