// Package fswatch is the fs_watch trigger family: each [[triggers]] entry
// of type "fs_watch" watches a path with fsnotify and starts a run per
// settled change, one run at a time (a change while the previous run is in
// flight is skipped and audited as fs_watch.skipped).
//
// Changes are debounced per path: a burst of events on one path within
// debounce_ms (default 250) becomes one fire, reported as "remove" or
// "rename" when the burst ended that way, else "create" when the path
// appeared during the burst, else "modify". With recursive = true every
// subdirectory is watched, including ones created later (files that appear
// in a new directory before its watch is added are reported as created).
package fswatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	fswatchspec "github.com/kilnworks/kiln/capabilities/fswatch/spec"
	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// DefaultDebounce applies when debounce_ms is unset.
const DefaultDebounce = 250 * time.Millisecond

// Events are the event names a trigger may filter on.
var Events = fswatchspec.Events

func init() {
	runtime.RegisterExtension(runtime.Extension{
		Name:      "fswatch",
		Setup:     setup,
		Listeners: listeners,
	})
}

// Validate checks every fs_watch trigger with the generator's rules.
func Validate(wf *workflow.Workflow) error {
	return spec.TriggerErr(wf, "fs_watch", fswatchspec.CheckTrigger)
}

func setup(ctx context.Context, h *runtime.Host) error { return Validate(h.Program.Workflow) }

func listeners(h *runtime.Host) ([]runtime.Listener, error) {
	if err := Validate(h.Program.Workflow); err != nil {
		return nil, err
	}
	return fire.Listeners(h, "fs_watch", func(i int, t workflow.Trigger) (*Listener, error) {
		return NewListener(h, i, t)
	})
}

// Listener watches one fs_watch trigger's path.
type Listener struct {
	gate      *fire.Gate
	root      string
	recursive bool
	events    map[string]bool
	debounce  time.Duration
}

// NewListener builds the listener of triggers[index]. A relative path is
// resolved against the workflow file's directory first, then the working
// directory; the path must exist at start-up.
func NewListener(h *runtime.Host, index int, t workflow.Trigger) (*Listener, error) {
	wf := h.Program.Workflow
	root := t.Path
	if !filepath.IsAbs(root) && wf.Source != "" {
		if cand := filepath.Join(filepath.Dir(wf.Source), root); exists(cand) {
			root = cand
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("triggers[%d] (fs_watch): path %q: %v", index, t.Path, err)
	}
	if !exists(abs) {
		return nil, fmt.Errorf("triggers[%d] (fs_watch): path %q does not exist", index, t.Path)
	}
	if _, err := h.Program.Entry(t.StartNode); err != nil {
		return nil, fmt.Errorf("triggers[%d] (fs_watch): start_node %q: %v", index, t.StartNode, err)
	}
	events := map[string]bool{}
	for _, e := range t.Events {
		events[e] = true
	}
	if len(events) == 0 {
		for _, e := range Events {
			events[e] = true
		}
	}
	debounce := DefaultDebounce
	if t.DebounceMS != nil {
		debounce = time.Duration(*t.DebounceMS) * time.Millisecond
	}
	return &Listener{
		gate:      &fire.Gate{Host: h, Prefix: "fs_watch", Name: fmt.Sprintf("fs_watch[%d] %s", index, abs), StartNode: t.StartNode},
		root:      abs,
		recursive: t.Recursive,
		events:    events,
		debounce:  debounce,
	}, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (l *Listener) Name() string { return l.gate.Name }

// burst is what the events of one path's burst fold to.
type burst struct {
	created bool
	last    string
}

// event is what a settled burst reports.
func (b *burst) event() string {
	switch {
	case b.last == "remove" || b.last == "rename":
		return b.last
	case b.created:
		return "create"
	}
	return "modify"
}

// Serve watches until ctx ends, then waits for the in-flight run.
func (l *Listener) Serve(ctx context.Context) error {
	defer l.gate.Wait()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("%s: %v", l.Name(), err)
	}
	defer w.Close()
	audit := l.gate.Host.Engine.Audit
	if _, err := l.add(w, l.root); err != nil {
		return fmt.Errorf("%s: %v", l.Name(), err)
	}
	if audit != nil {
		audit.Info("fs_watch.started", "trigger", l.Name(), "path", l.root, "recursive", l.recursive)
	}

	bursts := fire.NewDebouncer[string, burst](l.debounce, 0, nil)
	defer bursts.Stop()
	note := func(path, op string) {
		bursts.Note(path, func(b burst) burst {
			return burst{created: b.created || op == "create", last: op}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			op := opName(ev.Op)
			if op == "" {
				continue
			}
			note(ev.Name, op)
			if op == "create" && l.recursive {
				// Watch the new directory, and report what appeared in
				// it before the watch existed.
				found, err := l.add(w, ev.Name)
				if err != nil && audit != nil {
					audit.Warn("fs_watch.error", "trigger", l.Name(), "path", ev.Name, "error", err.Error())
				}
				for _, p := range found {
					note(p, "create")
				}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if audit != nil {
				audit.Warn("fs_watch.error", "trigger", l.Name(), "error", err.Error())
			}
		case <-bursts.C():
			for _, b := range bursts.Settled() {
				l.fire(ctx, b.Key, b.Value.event())
			}
		}
	}
}

// fire starts a run for a settled change, unless the trigger filters its
// event out.
func (l *Listener) fire(ctx context.Context, path, event string) {
	if !l.events[event] {
		return
	}
	l.gate.Fire(ctx, map[string]any{
		"type":             "fs_watch",
		"path":             path,
		"event":            event,
		"fired_at_unix_ms": time.Now().UnixMilli(),
		"tick":             l.gate.NextTick(),
	})
}

// add watches path (and, when recursive, every directory under it) and
// returns the entries found under it: for a directory created while
// watching, those appeared before its watch existed.
func (l *Listener) add(w *fsnotify.Watcher, path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // gone again before we looked: nothing to watch
		}
		return nil, err
	}
	if !info.IsDir() || !l.recursive {
		if path == l.root {
			return nil, w.Add(path)
		}
		return nil, nil
	}
	var found []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p != path {
			found = append(found, p)
		}
		if d.IsDir() {
			return w.Add(p)
		}
		return nil
	})
	return found, err
}

func opName(op fsnotify.Op) string {
	switch {
	case op.Has(fsnotify.Create):
		return "create"
	case op.Has(fsnotify.Remove):
		return "remove"
	case op.Has(fsnotify.Rename):
		return "rename"
	case op.Has(fsnotify.Write):
		return "modify"
	}
	return "" // chmod alone is not a change of content
}
