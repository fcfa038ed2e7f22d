// Package spec declares the fs family's node kinds: read_file, write_file
// and create_dir (see docs/reference.md). It holds data and checks only,
// so the generator links it without the family.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the fs family's declaration.
var Family = spec.Family{
	ID: "fs",
	Kinds: []spec.Kind{
		{
			Name:   "read_file",
			Doc:    "Reads a UTF-8 text file after the policy's fs.read check (path cleaned, \"..\" refused, symlinks resolved). Dry-run checks the policy and reads nothing.",
			Keys:   []spec.Key{pathFrom},
			Check:  CheckReadFile,
			Output: "{path, content, bytes}; dry-run: {path, dry_run: true}",
			Policy: "fs.read",
		},
		{
			Name: "write_file",
			Doc:  "Writes a file atomically (temp file + rename), creating parent directories and keeping an existing file's mode, after the policy's fs.write check. A string is written as it is, any other value JSON-encoded.",
			Keys: []spec.Key{pathFrom,
				{Name: "content_from", Type: spec.Path, Required: true, Doc: "the value to write"}},
			Limits: []string{"counts against [budget] max_fs_write_mb"},
			Check:  CheckWriteFile,
			Output: "{path, bytes, written: true}; dry-run: {path, bytes, dry_run: true}",
			Policy: "fs.write",
		},
		{
			Name:   "create_dir",
			Doc:    "Creates a directory and its parents (mkdir -p, idempotent) after the policy's fs.write check.",
			Keys:   []spec.Key{pathFrom},
			Check:  CheckCreateDir,
			Output: "{path, created: true}; dry-run: {path, dry_run: true}",
			Policy: "fs.write",
		},
	},
	Needs:         needs,
	NeedsIfLinked: true,
	NeedsDoc:      "a filesystem need for the directory of each [policy.fs] write (rw) and read (ro) pattern",
}

var pathFrom = spec.Key{Name: "path_from", Type: spec.Path, Required: true, Doc: "the file path (a string)"}

// CheckReadFile checks a read_file node.
func CheckReadFile(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("path_from", n.PathFrom != "")
	return is
}

// CheckWriteFile checks a write_file node.
func CheckWriteFile(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("path_from", n.PathFrom != "")
	is.Require("content_from", n.ContentFrom != "")
	return is
}

// CheckCreateDir checks a create_dir node.
func CheckCreateDir(n *workflow.Node, ctx spec.Context) []spec.Issue {
	return CheckReadFile(n, ctx)
}

// needs: the policy's filesystem patterns are paths the fs nodes may
// reach; a path both written and read is one rw need.
func needs(wf *workflow.Workflow) []spec.Need {
	if wf.Policy == nil || wf.Policy.FS == nil {
		return nil
	}
	var out []spec.Need
	write := map[string]bool{}
	for _, p := range wf.Policy.FS.Write {
		if b := spec.PatternBase(p); b != "" {
			write[b] = true
			out = append(out, spec.Need{Kind: spec.NeedFilesystem, Path: b, Mode: "rw"})
		}
	}
	for _, p := range wf.Policy.FS.Read {
		if b := spec.PatternBase(p); b != "" && !write[b] {
			out = append(out, spec.Need{Kind: spec.NeedFilesystem, Path: b, Mode: "ro"})
		}
	}
	return out
}
