// Package tape records a run with everything the outside world told it,
// and replays it against a workflow with every outside interaction served
// from the tape (docs/replay.md).
//
// A tape is the run record of --record (outcome, cost, trace) extended with
// the workflow digest, the trigger, every node attempt and every outside
// interaction in order. It is versioned JSON, and secrets never reach it:
// the whole text goes through runtime.RedactJSON before it is written.
package tape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
)

// Version is the tape format this package writes and reads.
const Version = 1

// MaxBytes bounds what reading one tape may take.
const MaxBytes = 256 << 20

// Tape is one recorded run.
type Tape struct {
	Tape           int    `json:"tape"` // format version
	Workflow       string `json:"workflow"`
	WorkflowDigest string `json:"workflow_digest"`
	StartNode      string `json:"start_node"`
	ExecutionID    string `json:"execution_id"`
	// StartedAt is the engine's clock reading at the run's start
	// (RFC 3339); a replay's clock reads it.
	StartedAt    string          `json:"started_at"`
	Status       string          `json:"status"`
	LastNode     any             `json:"last_node"`
	Detail       json.RawMessage `json:"detail"` // the outcome JSON
	WallMS       int64           `json:"wall_ms"`
	Cost         map[string]any  `json:"cost,omitempty"`
	Trigger      map[string]any  `json:"trigger"`
	Trace        *runtime.Trace  `json:"trace"`
	Attempts     []Attempt       `json:"attempts"`
	Interactions []Interaction   `json:"interactions"`
}

// Attempt is one node attempt, child runs' included (Depth > 0).
type Attempt struct {
	Node       string `json:"node"`
	Kind       string `json:"kind"`
	Attempt    int    `json:"attempt"`
	Depth      int    `json:"depth"`
	StartMS    int64  `json:"start_ms"` // since the run started
	DurationMS int64  `json:"duration_ms"`
	Status     string `json:"status"` // continue | terminate | fail | pause | error
	Branch     string `json:"branch,omitempty"`
	Output     any    `json:"output"`
	Error      *Err   `json:"error,omitempty"`
	// Input lists the outside requests the attempt made (their Seq).
	Input []int `json:"input,omitempty"`
}

// Interaction is one request to the outside world and its answer.
type Interaction struct {
	Seq      int             `json:"seq"`
	Node     string          `json:"node"`
	Attempt  int             `json:"attempt"`
	Kind     string          `json:"kind"` // llm.complete, mcp.call_tool, http.request, ...
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response,omitempty"`
	Error    *Err            `json:"error,omitempty"`
}

// Err is a recorded failure: its engine class and message, or the policy
// denial it was (Denial), so a replay fails the same way.
type Err struct {
	Class   string  `json:"class"`
	Message string  `json:"message"`
	Denial  *Denial `json:"denial,omitempty"`
}

// Denial is a recorded policy denial (policy.Denial).
type Denial struct {
	What   string `json:"what"`
	Target string `json:"target"`
	Reason string `json:"reason"`
	Source string `json:"source,omitempty"`
}

func errOf(err error) *Err {
	if err == nil {
		return nil
	}
	if d := (*policy.Denial)(nil); errors.As(err, &d) {
		return &Err{Class: string(runtime.ClassPolicy), Message: d.Error(),
			Denial: &Denial{What: d.What, Target: d.Target, Reason: d.Reason, Source: d.Source}}
	}
	var e *runtime.Error
	if !errors.As(err, &e) {
		// A foreign error replays as a foreign error, so the family
		// classifies it as it did when recording.
		return &Err{Message: err.Error()}
	}
	msg := e.Msg // without the node prefix: a replay adds it again
	if msg == "" {
		msg = e.Error()
	}
	return &Err{Class: string(e.Class), Message: msg}
}

// Encode renders t as indented JSON with every registered secret value
// redacted: the one way a tape is written.
func Encode(t *Tape) ([]byte, error) {
	t.Tape = Version
	data, err := runtime.EncodeJSONIndent(t)
	if err != nil {
		return nil, err
	}
	return append(runtime.RedactJSON(data), '\n'), nil
}

// Write writes t to path atomically, readable by its owner only.
func Write(path string, t *Tape) error {
	data, err := Encode(t)
	if err != nil {
		return err
	}
	return runtime.WriteFileAtomic(path, data, 0o600)
}

// ErrNotTape marks a file that is valid JSON but no tape (a plain run
// record of an older kiln, or anything else).
var ErrNotTape = errors.New("not a kiln tape")

// Read reads and checks the tape at path. Errors name the file.
func Read(path string) (*Tape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, MaxBytes>>20)
	}
	t, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Decode parses a tape: the version must be one this package reads, and
// the fields a replay needs must be there.
func Decode(data []byte) (*Tape, error) {
	var head struct {
		Tape *int `json:"tape"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if head.Tape == nil {
		return nil, fmt.Errorf("%w: no \"tape\" version (record the run again with --record or --record-dir)", ErrNotTape)
	}
	if *head.Tape != Version {
		return nil, fmt.Errorf("tape version %d: this kiln reads version %d", *head.Tape, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers stay exact, as the runtime's own values
	var t Tape
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("not a valid tape: %v", err)
	}
	switch {
	case t.Trigger == nil:
		return nil, errors.New("not a valid tape: \"trigger\" is missing")
	case t.Trace == nil:
		return nil, errors.New("not a valid tape: \"trace\" is missing")
	case t.Status == "":
		return nil, errors.New("not a valid tape: \"status\" is missing")
	}
	for i, x := range t.Interactions {
		if x.Kind == "" || x.Node == "" || len(x.Request) == 0 {
			return nil, fmt.Errorf("not a valid tape: interaction %d lacks its node, kind or request", i)
		}
	}
	return &t, nil
}
