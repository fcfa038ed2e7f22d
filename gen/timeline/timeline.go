// Package timeline shows a recorded run (a tape, or a plain run record)
// as a timeline: a table for the terminal, and a self-contained HTML page
// (no external asset, no network) with the node attempts as bars on a time
// axis, and, for a replay, the recorded and replayed runs side by side.
package timeline

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/tape"
)

// Load reads a run file: a tape (--record, --record-dir), or the plain run
// record of an older kiln, whose trace gives the attempts (one per entry,
// timed by its elapsed_ms).
func Load(path string) (*tape.Tape, error) {
	t, err := tape.Read(path)
	if err == nil || !errors.Is(err, tape.ErrNotTape) {
		return t, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rec tape.Tape
	dec := json.NewDecoder(io.LimitReader(f, tape.MaxBytes))
	dec.UseNumber()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("%s: not a run record: %v", path, err)
	}
	if rec.Trace == nil || rec.Status == "" {
		return nil, fmt.Errorf("%s: not a run record or tape (no \"trace\" or \"status\")", path)
	}
	var at int64
	for _, e := range rec.Trace.Entries {
		a := tape.Attempt{Node: e.NodeID, Kind: e.Kind, Attempt: 1, StartMS: at, DurationMS: max(e.ElapsedMS, 0),
			Status: e.Outcome, Output: e.Output}
		if b, ok := e.Branch.(string); ok {
			a.Branch = b
		}
		rec.Attempts = append(rec.Attempts, a)
		at += a.DurationMS
	}
	return &rec, nil
}

// Text writes the run as a table: one line per node attempt.
func Text(w io.Writer, t *tape.Tape) {
	fmt.Fprintf(w, "workflow %s  run %s  status %s  %d ms\n", t.Workflow, t.ExecutionID, t.Status, t.WallMS)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tKIND\tSTART\tDURATION\tATTEMPT\tBRANCH\tSTATUS")
	for _, a := range t.Attempts {
		node := strings.Repeat("  ", a.Depth) + a.Node
		status := a.Status
		if a.Error != nil {
			status += ": " + oneLine(a.Error.Message, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t+%d ms\t%d ms\t%d\t%s\t%s\n", node, a.Kind, a.StartMS, a.DurationMS, a.Attempt, orDash(a.Branch), status)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// Run is one lane of the page.
type Run struct {
	Label string // "recorded", "replayed", or the file name
	Tape  *tape.Tape
}

//go:embed page.html
var pageHTML string

//go:embed page.js
var pageJS string

//go:embed page.css
var pageCSS string

// HTML writes the page for runs (one, or the recorded and the replayed
// side by side); div, when set, marks where the replay diverged; svg,
// when set, is the workflow's graph with the run's path (gen/graph, which
// escapes every user text) shown above the timeline. Every
// value the run holds reaches the page as JSON data that the script shows
// as text only, and the page's policy forbids any other script or any
// load, so a node output cannot inject markup or call out.
func HTML(w io.Writer, runs []Run, div *tape.Divergence, svg []byte) error {
	data := pageData{Runs: make([]laneData, len(runs)), Divergence: div}
	title := "kiln run"
	for i, r := range runs {
		data.Runs[i] = lane(r)
		if i == 0 {
			title = "kiln run " + r.Tape.Workflow
		}
	}
	// encoding/json escapes <, > and & in strings, so the data cannot close
	// its script element.
	js, err := json.Marshal(data)
	if err != nil {
		return err
	}
	// Redaction re-encodes the strings it changes without that escaping:
	// escape again (in JSON text these characters only occur in strings).
	js = []byte(scriptSafe.Replace(string(runtime.RedactJSON(js))))
	styles := "'" + hash(pageCSS) + "'"
	graphHTML := ""
	if len(svg) > 0 {
		graphHTML = `<section id="graph">` + string(svg) + `</section>`
		// The graph's own style element is allowed by its hash too.
		for _, m := range styleRE.FindAllStringSubmatch(string(svg), -1) {
			styles += " '" + hash(m[1]) + "'"
		}
	}
	page := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(title),
		"{{CSP}}", fmt.Sprintf("default-src 'none'; img-src data:; style-src %s; script-src '%s'", styles, hash(pageJS)),
		"{{GRAPH}}", graphHTML,
		"{{CSS}}", pageCSS,
		"{{JS}}", pageJS,
		"{{DATA}}", string(js),
	).Replace(pageHTML)
	_, err = io.WriteString(w, page)
	return err
}

var scriptSafe = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`)

var styleRE = regexp.MustCompile(`(?s)<style>(.*?)</style>`)

// hash is the CSP source of an inline element's text.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

type pageData struct {
	Runs       []laneData       `json:"runs"`
	Divergence *tape.Divergence `json:"divergence"`
}

type laneData struct {
	Label    string             `json:"label"`
	Workflow string             `json:"workflow"`
	RunID    string             `json:"run_id"`
	Status   string             `json:"status"`
	TotalMS  int64              `json:"total_ms"`
	Attempts []barData          `json:"attempts"`
	Detail   any                `json:"detail"`
	Trigger  any                `json:"trigger"`
	Requests []tape.Interaction `json:"requests"`
}

type barData struct {
	tape.Attempt
	Iteration int `json:"iteration"` // 1 for the first run of the node, 2 for a loop's second ...
}

func lane(r Run) laneData {
	t := r.Tape
	l := laneData{Label: r.Label, Workflow: t.Workflow, RunID: t.ExecutionID, Status: t.Status,
		Detail: t.Detail, Trigger: t.Trigger, Requests: t.Interactions}
	if l.Requests == nil {
		l.Requests = []tape.Interaction{}
	}
	seen := map[string]int{}
	for _, a := range t.Attempts {
		if a.Attempt == 1 {
			seen[a.Node]++
		}
		l.Attempts = append(l.Attempts, barData{Attempt: a, Iteration: max(seen[a.Node], 1)})
		l.TotalMS = max(l.TotalMS, a.StartMS+a.DurationMS)
	}
	if l.Attempts == nil {
		l.Attempts = []barData{}
	}
	l.TotalMS = max(l.TotalMS, t.WallMS, 1)
	return l
}
