package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// durableFlags are the durable-run flags (docs/durable-runs.md). All of
// them need --state-dir.
type durableFlags struct {
	resume           string // --resume RUN_ID
	eachNode         bool   // --checkpoint-each-node
	list             bool   // --list-checkpoints
	resumeIncomplete bool   // --resume-incomplete
}

func defineDurableFlags(fs *flag.FlagSet, d *durableFlags) {
	fs.StringVar(&d.resume, "resume", "", "continue the checkpointed run `RUN_ID` (paused, or errored/incomplete) from --state-dir")
	fs.BoolVar(&d.eachNode, "checkpoint-each-node", false, "write a checkpoint after every node, so a crashed run can be resumed with --resume-incomplete")
	fs.BoolVar(&d.list, "list-checkpoints", false, "print the checkpoints under --state-dir as JSON and exit")
	fs.BoolVar(&d.resumeIncomplete, "resume-incomplete", false, "resume every incomplete checkpoint under --state-dir whose run is no longer executing (after a crash), then exit")
}

// sharedState reports whether wf keeps its state in a shared backend
// ([state] backend other than file): checkpoints live there, not under
// --state-dir.
func sharedState(wf *workflow.Workflow) bool {
	return wf != nil && wf.State != nil && wf.State.Backend != "" && wf.State.Backend != "file"
}

// check refuses inconsistent combinations before anything starts.
func (d *durableFlags) check(s *settings, wf *workflow.Workflow) error {
	actions := 0
	for _, on := range []bool{d.resume != "", d.list, d.resumeIncomplete} {
		if on {
			actions++
		}
	}
	if actions > 1 {
		return fmt.Errorf("--resume, --list-checkpoints and --resume-incomplete exclude each other")
	}
	if (actions > 0 || d.eachNode) && s.stateDir == "" && !sharedState(wf) {
		return fmt.Errorf("durable runs need --state-dir (or KILN_STATE_DIR)")
	}
	if d.resumeIncomplete && s.record != "" {
		return fmt.Errorf("--record records one run; it cannot be combined with --resume-incomplete")
	}
	if (actions > 0) && (s.input != "" || s.start != "") {
		return fmt.Errorf("a resumed run keeps its own start node and trigger; drop --start and --input")
	}
	return nil
}

// listCheckpoints prints every checkpoint (without its outputs and
// trigger, which may be large) as a JSON array. A file that is not a valid
// checkpoint is not listed: it is reported on stderr, naming the file, and
// the exit code is ExitUsage.
func listCheckpoints(ctx context.Context, h *runtime.Host, o Options, fail func(int, string, ...any) int) int {
	store := runtime.CheckpointStoreFor(h.Engine)
	if store == nil {
		return fail(ExitUsage, "--list-checkpoints: durable runs need --state-dir (or KILN_STATE_DIR)")
	}
	infos, bad, err := store.List(ctx)
	if err != nil {
		return fail(ExitUsage, "--list-checkpoints: %v", err)
	}
	list := make([]map[string]any, 0, len(infos))
	for _, in := range infos {
		list = append(list, map[string]any{
			"run_id":     in.RunID,
			"workflow":   in.Workflow,
			"state":      in.State,
			"reason":     in.Reason,
			"paused_at":  in.PausedAt,
			"next_node":  in.NextNode,
			"start_node": in.StartNode,
			"saved_at":   in.SavedAt.UTC().Format(time.RFC3339),
			"active":     in.Active,
			// Resumable by this workflow: same digest, not executing.
			"resumable": !in.Active && h.Program.CheckResume(in.Checkpoint) == nil,
		})
	}
	out, err := runtime.EncodeJSONIndent(list)
	if err != nil {
		return fail(ExitFailed, "encode: %v", err)
	}
	fmt.Fprintf(o.Stdout, "%s\n", runtime.RedactJSON(out))
	for _, err := range bad {
		fail(ExitUsage, "--list-checkpoints: %v", err)
	}
	if len(bad) > 0 {
		return ExitUsage
	}
	return ExitOK
}

// runDurable handles --resume, --resume-incomplete and (with a shared
// state backend, whose store Setup installs) --list-checkpoints; ok is
// false when none was given.
func runDurable(ctx context.Context, h *runtime.Host, s *settings, o Options, fail func(int, string, ...any) int) (code int, ok bool) {
	d := &s.durable
	timeout := time.Duration(s.timeoutSecs) * time.Second
	switch {
	case d.list:
		return listCheckpoints(ctx, h, o, fail), true
	case d.resume != "":
		store := runtime.CheckpointStoreFor(h.Engine)
		if store == nil {
			return fail(ExitUsage, "--resume: durable runs need --state-dir (or KILN_STATE_DIR)"), true
		}
		cp, err := store.Load(ctx, d.resume)
		if err != nil {
			return fail(ExitUsage, "--resume: %v", err), true
		}
		if err := h.Program.CheckResume(cp); err != nil {
			return fail(ExitUsage, "--resume: %v", err), true
		}
		rep := h.Fire(ctx, runtime.RunOptions{Resume: cp, CheckpointEachNode: d.eachNode, Timeout: timeout})
		return finish(rep, s, o, fail), true
	case d.resumeIncomplete:
		return resumeIncomplete(ctx, h, s, o, fail), true
	}
	return 0, false
}

// resumeIncomplete resumes every incomplete checkpoint whose run is not
// executing, one after the other, and prints [{run_id, outcome}]. Exit
// code: 5 when any resume failed or was refused, else 7 when any paused,
// else 0 (also when there was nothing to resume).
func resumeIncomplete(ctx context.Context, h *runtime.Host, s *settings, o Options, fail func(int, string, ...any) int) int {
	store := runtime.CheckpointStoreFor(h.Engine)
	if store == nil {
		return fail(ExitUsage, "--resume-incomplete: durable runs need --state-dir (or KILN_STATE_DIR)")
	}
	infos, bad, err := store.List(ctx)
	if err != nil {
		return fail(ExitUsage, "--resume-incomplete: %v", err)
	}
	// A state directory holding a file that is not a valid checkpoint is
	// not trusted: nothing is resumed until it is dealt with.
	if len(bad) > 0 {
		for _, err := range bad {
			fail(ExitUsage, "--resume-incomplete: %v", err)
		}
		return fail(ExitUsage, "--resume-incomplete: nothing resumed: %d invalid checkpoint file(s)", len(bad))
	}
	results := []map[string]any{}
	code := ExitOK
	worsen := func(c int) {
		if c == ExitFailed || (c == ExitPaused && code == ExitOK) {
			code = c
		}
	}
	for _, in := range infos {
		if in.State != runtime.CheckpointIncomplete || in.Active {
			continue
		}
		if err := h.Program.CheckResume(in.Checkpoint); err != nil {
			results = append(results, map[string]any{"run_id": in.RunID, "refused": err.Error()})
			worsen(ExitFailed)
			continue
		}
		rep := h.Fire(ctx, runtime.RunOptions{Resume: in.Checkpoint, CheckpointEachNode: true,
			Timeout: time.Duration(s.timeoutSecs) * time.Second})
		if err := rep.Outcome.Err; err != nil && runtime.TakenElsewhere(err) {
			results = append(results, map[string]any{"run_id": in.RunID, "skipped": runtime.Redact(err.Error())})
			continue
		}
		results = append(results, map[string]any{"run_id": in.RunID, "outcome": rep.Outcome})
		worsen(ExitCode(rep.Outcome.Status))
		if rep.Outcome.Status == runtime.StatusErrored {
			fmt.Fprintf(o.Stderr, "%s: run %s: %s\n", o.Prog, in.RunID, runtime.Redact(rep.Outcome.Reason))
		}
	}
	out, err := runtime.EncodeJSONIndent(results)
	if err != nil {
		return fail(ExitFailed, "encode: %v", err)
	}
	fmt.Fprintf(o.Stdout, "%s\n", runtime.RedactJSON(out))
	return code
}
