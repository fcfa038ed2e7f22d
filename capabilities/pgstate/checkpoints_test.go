package pgstate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/pgstate/pgtest"
	"github.com/kilnworks/kiln/runtime"
)

func openFor(t *testing.T, dsn, workflow string, lease time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{DSN: dsn, Lease: lease, Workflow: workflow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func checkpoint(id, state, next string) *runtime.Checkpoint {
	return &runtime.Checkpoint{RunID: id, Workflow: "wf", WorkflowDigest: "d1", StartNode: "main", State: state,
		NextNode: next, Trigger: map[string]any{"kind": "manual"}, Outputs: map[string]any{"a": "x"}, Loops: map[string]int{}}
}

// stopRenewing makes s behave as a replica that died: its leases are no
// longer renewed (its pool stays, so the test can watch it being fenced).
func stopRenewing(s *Store) {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// TestCheckpointsAcrossReplicas: a run one replica executes (claimed,
// checkpointed) is listed as active on another, which can neither claim
// it nor save over it; once released, the other resumes it (claims,
// loads the same checkpoint) and deletes it when done.
func TestCheckpointsAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a, b := openFor(t, dsn, "wf", time.Minute), openFor(t, dsn, "wf", time.Minute)
	ctx := context.Background()

	release, err := a.Claim(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if list, _, err := b.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("a claimed run without a checkpoint is listed: %v %v", list, err)
	}
	if err := a.Save(ctx, checkpoint("r1", runtime.CheckpointIncomplete, "b")); err != nil {
		t.Fatal(err)
	}
	list, bad, err := b.List(ctx)
	if err != nil || len(bad) > 0 || len(list) != 1 || !list[0].Active || list[0].NextNode != "b" {
		t.Fatalf("list on b: %+v %v %v", list, bad, err)
	}
	if _, err := b.Claim(ctx, "r1"); !errors.Is(err, runtime.ErrRunHeld) {
		t.Fatalf("b claimed a run a live replica executes: %v", err)
	}
	if err := b.Save(ctx, checkpoint("r1", runtime.CheckpointPaused, "c")); !errors.Is(err, runtime.ErrRunHeld) {
		t.Fatalf("b saved over a run a live replica executes: %v", err)
	}
	if err := b.Delete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if cp, err := b.Load(ctx, "r1"); err != nil || cp.NextNode != "b" {
		t.Fatalf("b deleted or changed a live replica's run: %+v %v", cp, err)
	}
	release()

	list, _, _ = b.List(ctx)
	if len(list) != 1 || list[0].Active {
		t.Fatalf("after release: %+v", list)
	}
	rb, err := b.Claim(ctx, "r1")
	if err != nil {
		t.Fatalf("b cannot resume a released run: %v", err)
	}
	cp, err := b.Load(ctx, "r1")
	if err != nil || cp.State != runtime.CheckpointIncomplete || cp.Outputs["a"] != "x" || cp.WorkflowDigest != "d1" {
		t.Fatalf("loaded on b: %+v %v", cp, err)
	}
	if err := b.Delete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	rb()
	if _, err := a.Load(ctx, "r1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Fatalf("after delete: %v", err)
	}
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_checkpoints`); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

// TestRunOwnershipLapsesWithItsReplica: a live owner keeps its run past
// several leases (it renews); an owner that stops renewing (a dead
// replica) loses it once its lease has run out, to exactly one of the
// replicas that want it, and can then no longer save over it.
func TestRunOwnershipLapsesWithItsReplica(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const lease = 3 * time.Second
	ctx := context.Background()
	a := openFor(t, dsn, "wf", lease)
	if _, err := a.Claim(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(ctx, checkpoint("r1", runtime.CheckpointIncomplete, "b")); err != nil {
		t.Fatal(err)
	}
	// Wait for two renewals (the lease end moves forward twice), then the
	// run must still be a's.
	first := query[time.Time](t, dsn, `SELECT lease_until FROM kiln_checkpoints WHERE run_id = 'r1'`)
	waitFor(t, 10*lease, "two renewals", func() bool {
		return query[time.Time](t, dsn, `SELECT lease_until FROM kiln_checkpoints WHERE run_id = 'r1'`).After(first.Add(lease / 2))
	})
	others := make([]*Store, 4)
	for i := range others {
		others[i] = openFor(t, dsn, "wf", lease)
	}
	if _, err := others[0].Claim(ctx, "r1"); !errors.Is(err, runtime.ErrRunHeld) {
		t.Fatalf("a renewing owner lost its run: %v", err)
	}

	stopRenewing(a)
	// Every other replica tries until one has it; exactly one ever does.
	var mu sync.Mutex
	var winners []int
	var wg sync.WaitGroup
	deadline := time.Now().Add(10 * lease)
	for i, s := range others {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				done := len(winners) > 0
				mu.Unlock()
				if done {
					return
				}
				if _, err := s.Claim(ctx, "r1"); err == nil {
					mu.Lock()
					winners = append(winners, i)
					mu.Unlock()
					return
				} else if !errors.Is(err, runtime.ErrRunHeld) {
					t.Error(err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d replicas took the dead owner's run, want exactly 1: %v", len(winners), winners)
	}
	if err := a.Save(ctx, checkpoint("r1", runtime.CheckpointIncomplete, "c")); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Fatalf("the dead owner still saves over the run: %v", err)
	}
	if cp, err := others[winners[0]].Load(ctx, "r1"); err != nil || cp.NextNode != "b" {
		t.Fatalf("%+v %v", cp, err)
	}
}

// TestConcurrentClaimsOfOneRun: replicas claiming one free run at once:
// exactly one gets it.
func TestConcurrentClaimsOfOneRun(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	seed := openFor(t, dsn, "wf", time.Minute)
	if err := seed.Save(ctx, checkpoint("r1", runtime.CheckpointIncomplete, "b")); err != nil {
		t.Fatal(err)
	}
	stores := make([]*Store, 8)
	for i := range stores {
		stores[i] = openFor(t, dsn, "wf", time.Minute)
	}
	var won sync.WaitGroup
	results := make(chan error, len(stores))
	start := make(chan struct{})
	for _, s := range stores {
		won.Go(func() {
			<-start
			_, err := s.Claim(ctx, "r1")
			results <- err
		})
	}
	close(start)
	won.Wait()
	close(results)
	n := 0
	for err := range results {
		switch {
		case err == nil:
			n++
		case !errors.Is(err, runtime.ErrRunHeld):
			t.Error(err)
		}
	}
	if n != 1 {
		t.Fatalf("%d of %d concurrent claims won, want 1", n, len(stores))
	}
}

// TestCheckpointsAreRedactedAndChecked: a registered secret value never
// reaches the database, a stored checkpoint is checked as strictly as a
// file (a row that does not decode is reported, not resumed), and each
// workflow lists only its own runs.
func TestCheckpointsAreRedactedAndChecked(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	s := openFor(t, dsn, "wf", time.Minute)
	const secret = "pgstate-test-secret-value-7f3a9c"
	runtime.RedactValue(secret)
	cp := checkpoint("r1", runtime.CheckpointPaused, "b")
	cp.Outputs = map[string]any{"a": "token " + secret}
	cp.Reason = "approve " + secret
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if raw := query[[]byte](t, dsn, `SELECT data FROM kiln_checkpoints WHERE run_id = 'r1'`); strings.Contains(string(raw), secret) {
		t.Fatalf("the secret reached the database: %s", raw)
	}
	if cp.Outputs["a"] != "token "+secret {
		t.Fatal("Save changed the run's own values")
	}

	sqlExec(t, dsn, `INSERT INTO kiln_checkpoints (run_id, workflow, state, data, saved_at)
		VALUES ('r2', 'wf', 'paused', '{"run_id":"other"}', now())`)
	list, bad, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].RunID != "r1" || len(bad) != 1 || !strings.Contains(bad[0].Error(), "r2") {
		t.Fatalf("list: %+v %v %v", list, bad, err)
	}
	if _, err := s.Load(ctx, "r2"); err == nil {
		t.Fatal("a checkpoint that does not decode was loaded")
	}

	other := openFor(t, dsn, "another", time.Minute)
	if list, _, _ := other.List(ctx); len(list) != 0 {
		t.Fatalf("another workflow lists this one's runs: %+v", list)
	}
	if _, err := s.Claim(ctx, "../x"); err == nil {
		t.Fatal("an invalid run id was claimed")
	}

	// The claim of a run whose replica died before its first checkpoint
	// is swept once its lease is long gone; a live one stays.
	sqlExec(t, dsn, `INSERT INTO kiln_checkpoints (run_id, owner, lease_until) VALUES ('dead', 'x', now() - interval '2 hours')`)
	if _, err := s.Claim(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	s.Sweep(ctx)
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_checkpoints WHERE data IS NULL`); n != 1 {
		t.Fatalf("%d checkpoint-less claims after the sweep, want the live one", n)
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunRecordsAcrossReplicas: a record put by one replica is read by
// another, replaced in place, gone once its ttl has passed by the
// database's clock, and swept from the table.
func TestRunRecordsAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	a, b := openFor(t, dsn, "wf", time.Minute), openFor(t, dsn, "wf", time.Minute)
	id := strings.Repeat("ab", 16)
	now := time.Now().UTC().Truncate(time.Second)
	rec := runtime.RunRecord{ID: id, Route: "POST /jobs", State: runtime.RunAccepted, Created: now, Updated: now}
	if err := a.PutRun(ctx, rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.GetRun(ctx, id)
	if err != nil || !ok || got.Route != "POST /jobs" || got.State != runtime.RunAccepted || !got.Created.Equal(now) {
		t.Fatalf("b reads %+v %v %v", got, ok, err)
	}
	rec.State, rec.Outcome = runtime.RunEnded, []byte(`{"status":"completed"}`)
	if err := b.PutRun(ctx, rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := a.GetRun(ctx, id); !ok || got.State != runtime.RunEnded || string(got.Outcome) != `{"status":"completed"}` {
		t.Fatalf("a reads %+v", got)
	}
	if _, ok, err := a.GetRun(ctx, strings.Repeat("cd", 16)); ok || err != nil {
		t.Fatalf("an unknown id: %v %v", ok, err)
	}
	if err := a.PutRun(ctx, runtime.RunRecord{ID: "../../etc"}, time.Hour); err == nil {
		t.Fatal("an invalid id was stored")
	}

	short := strings.Repeat("ef", 16)
	if err := a.PutRun(ctx, runtime.RunRecord{ID: short, State: runtime.RunRunning}, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.GetRun(ctx, short); !ok {
		t.Fatal("a record is gone before its ttl")
	}
	waitFor(t, 30*time.Second, "expiry", func() bool { _, ok, _ := b.GetRun(ctx, short); return !ok })
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_runs`); n != 2 {
		t.Fatalf("%d rows before the sweep, want 2 (expired rows stay until swept)", n)
	}
	b.SweepRuns(ctx)
	if n := query[int64](t, dsn, `SELECT count(*) FROM kiln_runs`); n != 1 {
		t.Fatalf("%d rows after the sweep, want 1", n)
	}
	if err := a.PutRun(ctx, runtime.RunRecord{ID: short, Outcome: make([]byte, maxRunRecordBytes)}, 0); err == nil {
		t.Fatal("a record over the limit was stored")
	}
}
