package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// memCheckpoints is a CheckpointStore in memory, standing in for a
// shared backend: it keeps the encoded form, as a database would.
type memCheckpoints struct {
	mu     sync.Mutex
	data   map[string][]byte
	owners map[string]bool
}

func newMemCheckpoints() *memCheckpoints {
	return &memCheckpoints{data: map[string][]byte{}, owners: map[string]bool{}}
}

func (m *memCheckpoints) Save(_ context.Context, cp *Checkpoint) error {
	b, err := EncodeCheckpoint(cp)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[cp.RunID] = b
	return nil
}

func (m *memCheckpoints) Load(_ context.Context, id string) (*Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.data[id]
	if !ok {
		return nil, fmt.Errorf("%w for run %s", ErrNoCheckpoint, id)
	}
	return DecodeCheckpoint(b, id)
}

func (m *memCheckpoints) List(ctx context.Context) ([]CheckpointInfo, []error, error) {
	return nil, nil, nil
}

func (m *memCheckpoints) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, id)
	return nil
}

func (m *memCheckpoints) Claim(_ context.Context, id string) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owners[id] {
		return nil, fmt.Errorf("run %s is %w", id, ErrRunHeld)
	}
	m.owners[id] = true
	return func() { m.mu.Lock(); delete(m.owners, id); m.mu.Unlock() }, nil
}

// TestInstalledCheckpointStoreCarriesDurableRuns: with a checkpoint store
// installed and no state directory, a run pauses into the store, resumes
// from it (claimed while it runs) and is deleted from it on completion;
// a run its owner holds is refused.
func TestInstalledCheckpointStoreCarriesDurableRuns(t *testing.T) {
	dReset()
	store := newMemCheckpoints()
	e := &Engine{Services: &Services{}}
	SetCheckpointStore(e.Services, store)
	p := dProgram(t, "d1", []workflow.Node{dNode("a", "d_step"), dNode("gate", "d_pause"), dNode("b", "d_step")},
		chainEdges("a", "gate", "b"))
	ctx := context.Background()
	rep := e.Run(ctx, p, RunOptions{ExecutionID: "run-mem"})
	if rep.Outcome.Status != StatusPaused {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	cp, err := store.Load(ctx, "run-mem")
	if err != nil || cp.State != CheckpointPaused || cp.NextNode != "b" {
		t.Fatalf("paused into the store: %+v %v", cp, err)
	}

	release, _ := store.Claim(ctx, "run-mem")
	rep = e.Run(ctx, p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusErrored || !errors.Is(rep.Outcome.Err, ErrRunHeld) {
		t.Fatalf("resumed a run its owner holds: %+v", rep.Outcome)
	}
	release()

	rep = e.Run(ctx, p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusCompleted {
		t.Fatalf("resume: %+v", rep.Outcome)
	}
	if _, err := store.Load(ctx, "run-mem"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("the completed run's checkpoint stays: %v", err)
	}
	if got := dSteped(); len(got) != 2 || got[1] != "b" {
		t.Fatalf("steps %v", got)
	}
}

// TestResumeRefusesACheckpointThatMovedOn: a caller that read a run's
// incomplete checkpoint, while another process resumed that run and
// paused it meanwhile, does not resume it on the strength of the old read
// (--resume-incomplete would otherwise run past an approval).
func TestResumeRefusesACheckpointThatMovedOn(t *testing.T) {
	dReset()
	dir := t.TempDir()
	store := FileCheckpoints{Dir: dir}
	p := dProgram(t, "d1", []workflow.Node{dNode("a", "d_step"), dNode("gate", "d_pause"), dNode("b", "d_step")},
		chainEdges("a", "gate", "b"))
	ctx := context.Background()
	old := &Checkpoint{RunID: "run-mv", Workflow: "durable", WorkflowDigest: "d1", StartNode: "",
		State: CheckpointIncomplete, NextNode: "a", Trigger: map[string]any{}, Outputs: map[string]any{}, Loops: map[string]int{}}
	if err := store.Save(ctx, old); err != nil {
		t.Fatal(err)
	}
	read, err := store.Load(ctx, "run-mv")
	if err != nil {
		t.Fatal(err)
	}
	moved := *old
	moved.State, moved.PausedAt, moved.NextNode = CheckpointPaused, "gate", "b"
	if err := store.Save(ctx, &moved); err != nil {
		t.Fatal(err)
	}

	rep := (&Engine{StateDir: dir}).Run(ctx, p, RunOptions{Resume: read})
	if rep.Outcome.Status != StatusErrored || !errors.Is(rep.Outcome.Err, ErrRunMoved) {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if got := dSteped(); len(got) != 0 {
		t.Fatalf("steps ran: %v", got)
	}
	if cp, err := store.Load(ctx, "run-mv"); err != nil || cp.State != CheckpointPaused || cp.NextNode != "b" {
		t.Fatalf("the paused checkpoint changed: %+v %v", cp, err)
	}
}
