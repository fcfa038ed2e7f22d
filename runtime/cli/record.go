package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/tape"
)

// recordFlags are --record-dir and its bounds (--record FILE is settings.record).
type recordFlags struct {
	dir     string
	keep    int
	maxDays int
}

func defineRecordFlags(fs *flag.FlagSet, r *recordFlags) {
	fs.StringVar(&r.dir, "record-dir", "", "write a tape of every run (serve and trigger runs too) into `directory`, one file per run")
	fs.IntVar(&r.keep, "record-keep", 100, "--record-dir: keep at most `N` tapes (the oldest go first)")
	fs.IntVar(&r.maxDays, "record-max-age-days", 7, "--record-dir: delete tapes older than `days`")
}

func (r *recordFlags) check() error {
	if r.dir == "" {
		return nil
	}
	if r.keep < 1 || r.maxDays < 1 {
		return fmt.Errorf("--record-keep and --record-max-age-days must be at least 1")
	}
	return nil
}

// tapeFilePrefix names the files --record-dir writes (and alone prunes).
const tapeFilePrefix = "tape-"

// taping records the host's runs as tapes: the one-shot run into --record
// FILE, every run into --record-dir. Resumed runs are not taped (their
// first part ran in another process); --record still writes their record.
type taping struct {
	host    *runtime.Host
	file    string // --record ("" = none)
	flags   recordFlags
	written sync.Map // *runtime.Report → true once its tape is written to file
	seq     atomic.Int64
	pruneMu sync.Mutex
	errs    func(error)
}

// attachTapes makes the host record its runs when --record or --record-dir
// is given; otherwise it leaves the host (and the engine's hot path) alone.
func attachTapes(h *runtime.Host, s *settings, warn func(error)) *taping {
	if s.record == "" && s.rec.dir == "" {
		return nil
	}
	t := &taping{host: h, file: s.record, flags: s.rec, errs: warn}
	h.Tapes = t.start
	return t
}

// observe wraps the engine's observer (after the extensions set theirs) so
// node attempts reach the tape.
func (t *taping) observe() {
	if t != nil {
		t.host.Engine.Observer = tape.Observer(t.host.Engine.Observer)
	}
}

func (t *taping) start(ctx context.Context, opts *runtime.RunOptions) (context.Context, func(*runtime.Report)) {
	if opts.Resume != nil {
		return ctx, nil
	}
	trigger := opts.Trigger
	if trigger == nil {
		trigger = runtime.MakeTrigger("manual", nil)
		opts.Trigger = trigger
	}
	rec := tape.NewRecorder()
	return runtime.WithOutside(ctx, rec), func(rep *runtime.Report) {
		tp, err := rec.Tape(t.host.Program, trigger, rep)
		if err != nil {
			t.errs(fmt.Errorf("tape: %v", err))
			return
		}
		if t.file != "" && !t.host.ServeMode {
			if err := tape.Write(t.file, tp); err != nil {
				t.errs(fmt.Errorf("--record: %v", err))
			} else {
				t.written.Store(rep, true)
			}
		}
		if t.flags.dir != "" {
			name := fmt.Sprintf("%s%s-%06d-%s.json", tapeFilePrefix, time.Now().UTC().Format("20060102T150405.000Z"),
				t.seq.Add(1), safeName(rep.ExecutionID))
			if err := tape.Write(filepath.Join(t.flags.dir, name), tp); err != nil {
				t.errs(fmt.Errorf("--record-dir: %v", err))
			}
			t.prune()
		}
	}
}

// wrote reports whether rep's tape went to --record FILE already.
func (t *taping) wrote(rep *runtime.Report) bool {
	if t == nil {
		return false
	}
	_, ok := t.written.Load(rep)
	return ok
}

// prune keeps --record-dir within its bounds: tapes older than the age
// limit go, then the oldest beyond the count. Only this process's file
// names (tape-*.json) are touched.
func (t *taping) prune() {
	t.pruneMu.Lock()
	defer t.pruneMu.Unlock()
	entries, err := readDir(t.flags.dir)
	if err != nil {
		return
	}
	type tapeFile struct {
		name string
		mod  time.Time
	}
	var files []tapeFile
	cutoff := time.Now().Add(-time.Duration(t.flags.maxDays) * 24 * time.Hour)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tapeFilePrefix) || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if info.ModTime().Before(cutoff) {
			_ = os.Remove(filepath.Join(t.flags.dir, e.Name()))
			continue
		}
		files = append(files, tapeFile{e.Name(), info.ModTime()})
	}
	// Names start with the UTC time and a sequence number: name order is
	// age order, even within one clock tick.
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	for len(files) > t.flags.keep {
		_ = os.Remove(filepath.Join(t.flags.dir, files[0].name))
		files = files[1:]
	}
}

// readDir lists dir unsorted (os.ReadDir's sort costs every sealed binary
// several KB; callers sort the names they keep).
func readDir(dir string) ([]os.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// safeName keeps a run id usable in a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
