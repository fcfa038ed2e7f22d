// Package sealed is the entry point of a sealed binary: the program kiln
// generates calls Main with its compiled-in workflow and its embedded
// manifest. Main answers `manifest`, `--version` and `verify` itself;
// everything else it hands to the shared run CLI (runtime/cli) with Sealed
// set, so the binary runs only its own workflow, and only after checking
// that its tables, needs and sources are the ones it was sealed with.
package sealed

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Main runs the sealed binary and exits with the CLI's exit code.
// manifestBlob is the marker-wrapped manifest (manifest.Wrap).
func Main(wf *workflow.Workflow, manifestBlob []byte) {
	os.Exit(Run(os.Args[1:], wf, manifestBlob, Options{Prog: filepath.Base(os.Args[0]), Exits: true}))
}

// Options are the process details Run needs; zero values mean the real
// process (os.Stdout, ...).
type Options struct {
	Prog   string
	Stdout io.Writer
	Stderr io.Writer
	Exits  bool // the process exits when Run returns (cli.Options.Exits)
}

// Run is Main without the exit, for tests.
func Run(args []string, wf *workflow.Workflow, manifestBlob []byte, o Options) int {
	if o.Prog == "" {
		o.Prog = "sealed"
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	raw, m, err := open(wf, manifestBlob)
	if err != nil {
		// The generator wrote a valid manifest: this one was damaged or
		// altered after sealing.
		fmt.Fprintf(o.Stderr, "%s: %v; refusing to start\n", o.Prog, err)
		return cli.ExitTampered
	}
	if len(args) > 0 {
		// These answer even when the binary was altered after sealing, so
		// an operator can inspect it; they run nothing.
		switch args[0] {
		case "verify": // verify.go
			if len(args) > 1 {
				fmt.Fprintf(o.Stderr, "%s: verify takes no arguments\n", o.Prog)
				return cli.ExitUsage
			}
			if err := verify(o.Stdout, wf, m); err != nil {
				fmt.Fprintf(o.Stderr, "%s: %v\n", o.Prog, err)
				return cli.ExitFailed
			}
			return cli.ExitOK
		case "manifest":
			if len(args) > 1 {
				fmt.Fprintf(o.Stderr, "%s: manifest takes no arguments\n", o.Prog)
				return cli.ExitUsage
			}
			if _, err := o.Stdout.Write(printable(raw, m)); err != nil {
				return cli.ExitUsage
			}
			return cli.ExitOK
		case "--version", "-version", "version":
			fmt.Fprintln(o.Stdout, versionLine(o.Prog, m))
			return cli.ExitOK
		}
	}
	// Everything else (a run, serve, resume, the needs report) goes
	// through the same tables that are checked here, before any of it
	// starts.
	if err := checkSeal(wf, m); err != nil { // verify.go
		fmt.Fprintf(o.Stderr, "%s: %v; refusing to start (`%s verify` lists every check)\n", o.Prog, err, o.Prog)
		return cli.ExitTampered
	}
	b, err := build(m) // needs.go
	if err != nil {
		fmt.Fprintf(o.Stderr, "%s: %v\n", o.Prog, err)
		return cli.ExitUsage
	}
	return cli.Main(args, cli.Options{
		Prog:     o.Prog,
		Workflow: wf,
		Sealed:   true,
		Version:  m.KilnVersion,
		Stdout:   o.Stdout,
		Stderr:   o.Stderr,
		Build:    b,
		Exits:    o.Exits,
	})
}

// open unwraps and decodes the manifest; checkSeal compares it with wf.
func open(wf *workflow.Workflow, blob []byte) ([]byte, *manifest.Manifest, error) {
	if wf == nil {
		return nil, nil, fmt.Errorf("no compiled-in workflow")
	}
	raw, err := manifest.Unwrap(blob)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Decode(raw)
	if err != nil {
		return nil, nil, err
	}
	return raw, m, nil
}

// printable is the manifest as `BIN manifest` prints it: the embedded
// bytes, with go_version filled from the running binary when the
// generator could not know the toolchain (kiln gen without build).
func printable(raw []byte, m *manifest.Manifest) []byte {
	if m.GoVersion != "" {
		return raw
	}
	m.GoVersion = goruntime.Version()
	out, err := manifest.Encode(m)
	if err != nil {
		return raw
	}
	return out
}

func versionLine(prog string, m *manifest.Manifest) string {
	goV := m.GoVersion
	if goV == "" {
		goV = goruntime.Version()
	}
	return fmt.Sprintf("%s: workflow %s (sha256 %s), kiln %s, %s, families %s",
		prog, m.Workflow.Name, m.Workflow.Digest, m.KilnVersion, goV, strings.Join(m.FamilyIDs(), ","))
}

// Sources holds the exact source bytes of the compiled-in workflows, by
// their SHA-256 (the Digest of each workflow in the tree). The generated
// program registers them at init; they are never parsed at run time, only
// kept so the binary can prove what it was built from.
var (
	sourcesMu sync.RWMutex
	sources   = map[string][]byte{}
)

// RegisterSource records the source bytes of the workflow with digest.
func RegisterSource(digest string, data []byte) {
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	sources[digest] = data
}

// Source returns the registered source bytes of the workflow with digest.
func Source(digest string) ([]byte, bool) {
	sourcesMu.RLock()
	defer sourcesMu.RUnlock()
	b, ok := sources[digest]
	return b, ok
}
