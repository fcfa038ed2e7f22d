package gen

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// loader reads a workflow and, recursively, the child workflows and files
// it declares. Each distinct file is read once.
type loader struct {
	read func(path string) ([]byte, error)
	// cache holds workflows by resolved path; a nil entry is a file being
	// loaded (on the current chain), which is how cycles are found.
	cache map[string]*workflow.Workflow
	// failures records, per workflow, the declared paths (as written) of
	// children and assets that could not be loaded, and why. The validator
	// turns them into issues at the declaring node.
	failures map[*workflow.Workflow]map[string]*loadFailure
	// files holds what was read, by absolute path: each file is read once.
	files map[string][]byte
	// sign checks workflow signatures (wfsign.go).
	sign signState
}

// loadFailure is why a declared file could not be loaded.
type loadFailure struct {
	kind string // not_found, unreadable, parse_error, cycle, depth_exceeded
	err  error
}

func newLoader(read func(string) ([]byte, error)) *loader {
	return &loader{
		read:     read,
		cache:    map[string]*workflow.Workflow{},
		failures: map[*workflow.Workflow]map[string]*loadFailure{},
		files:    map[string][]byte{},
	}
}

// osReadFile reads a regular file of bounded size.
func osReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d MiB", maxFileBytes>>20)
	}
	return data, nil
}

func (l *loader) loadRoot(path string) (*workflow.Workflow, error) {
	data, err := l.readOnce(path)
	if err != nil {
		return nil, &ParseError{File: path, Msg: "cannot read: " + readErrText(err)}
	}
	wf, err := Decode(path, data)
	if err != nil {
		return nil, err
	}
	if err := l.verifyRoot(path, data, wf); err != nil {
		return nil, err
	}
	key := absPath(path)
	l.cache[key] = nil
	l.loadRefs(wf, filepath.Dir(path), 0)
	l.cache[key] = wf
	return wf, nil
}

// readErrText drops the path from an *fs.PathError: callers name the file.
func readErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// resolve finds a declared relative path: against dir (the declaring
// workflow's directory) first, then the working directory, for
// compatibility with the reference runtime. It returns the path to read.
func (l *loader) resolve(dir, p string) (string, []byte, error) {
	if filepath.IsAbs(p) {
		data, err := l.readOnce(p)
		return p, data, err
	}
	first := filepath.Join(dir, p)
	data, err := l.readOnce(first)
	if err == nil {
		return first, data, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return first, nil, err
	}
	if absPath(first) == absPath(p) {
		return first, nil, notFoundError{dir}
	}
	data, err2 := l.readOnce(p)
	if err2 == nil {
		return p, data, nil
	}
	if !errors.Is(err2, fs.ErrNotExist) {
		return p, nil, err2
	}
	return first, nil, notFoundError{dir + " and the working directory"}
}

// readOnce reads p, or returns what an earlier read of the same file gave.
func (l *loader) readOnce(p string) ([]byte, error) {
	key := absPath(p)
	if data, ok := l.files[key]; ok {
		return data, nil
	}
	data, err := l.read(p)
	if err == nil {
		l.files[key] = data
	}
	return data, err
}

// notFoundError says where a relative path was looked for.
type notFoundError struct{ where string }

func (e notFoundError) Error() string        { return "not found (looked in " + e.where + ")" }
func (e notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// fail records why a declared path could not be loaded; kind "" derives
// not_found or unreadable from err.
func (l *loader) fail(wf *workflow.Workflow, declared, kind string, err error) {
	if kind == "" {
		kind = "unreadable"
		if errors.Is(err, fs.ErrNotExist) {
			kind = "not_found"
		}
	}
	if l.failures[wf] == nil {
		l.failures[wf] = map[string]*loadFailure{}
	}
	l.failures[wf][declared] = &loadFailure{kind: kind, err: err}
}

// loadRefs loads wf's child workflows and asset files (dir is wf's own
// directory) into wf.Children and wf.Assets.
func (l *loader) loadRefs(wf *workflow.Workflow, dir string, depth int) {
	for _, p := range assetPaths(wf) {
		if _, done := wf.Assets[p]; done {
			continue
		}
		_, data, err := l.resolve(dir, p)
		if err != nil {
			l.fail(wf, p, "", err)
			continue
		}
		if wf.Assets == nil {
			wf.Assets = map[string][]byte{}
		}
		wf.Assets[p] = data
	}
	for _, p := range childPaths(wf) {
		if _, done := wf.Children[p]; done {
			continue
		}
		if depth+1 > maxLoadDepth {
			l.fail(wf, p, "depth_exceeded", fmt.Errorf("child workflows nest deeper than %d levels", maxLoadDepth))
			continue
		}
		resolved, data, err := l.resolve(dir, p)
		if err != nil {
			l.fail(wf, p, "", err)
			continue
		}
		key := absPath(resolved)
		child, seen := l.cache[key]
		if seen && child == nil {
			l.fail(wf, p, "cycle", fmt.Errorf("%s is already being loaded by a workflow that calls this one (a cycle)", resolved))
			continue
		}
		if seen && !l.childSignatureOK(wf, child, resolved, data) {
			continue
		}
		if !seen {
			c, err := Decode(resolved, data)
			if err != nil {
				l.fail(wf, p, "parse_error", err)
				continue
			}
			if !l.childSignatureOK(wf, c, resolved, data) {
				continue
			}
			l.cache[key] = nil
			l.loadRefs(c, filepath.Dir(resolved), depth+1)
			l.cache[key] = c
			child = c
		}
		if wf.Children == nil {
			wf.Children = map[string]*workflow.Workflow{}
		}
		wf.Children[p] = child
	}
}

// childPaths lists the child workflow paths wf declares, in order, once.
func childPaths(wf *workflow.Workflow) []string {
	var out []string
	for i := range wf.Nodes {
		out = append(out, nodeChildPaths(&wf.Nodes[i])...)
	}
	return uniqueNonEmpty(out)
}

// assetPaths lists the files wf declares that are read at load time:
// the files its nodes' kinds declare (output schemas, prompt files),
// input schemas, JWKS files and the [policy.rego] file.
func assetPaths(wf *workflow.Workflow) []string {
	var out []string
	for i := range wf.Nodes {
		if kind, ok := all.Kind(wf.Nodes[i].Type); ok && kind.Files != nil {
			out = append(out, kind.Files(&wf.Nodes[i])...)
		}
	}
	for _, r := range wf.HTTPRoutes {
		out = append(out, r.InputSchema)
	}
	if wf.Auth != nil {
		for _, name := range runtime.SortedKeys(wf.Auth.OIDC) {
			out = append(out, wf.Auth.OIDC[name].JWKSFile)
		}
	}
	if wf.Policy != nil && wf.Policy.Rego != nil {
		out = append(out, wf.Policy.Rego.File) // embedded: the signed policy is the one enforced
	}
	return uniqueNonEmpty(out)
}

func uniqueNonEmpty(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
