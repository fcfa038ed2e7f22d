// Package fs is the capability family of the local file nodes: read_file,
// write_file and create_dir. Every path goes through the run's policy
// first (fs.read or fs.write): the check cleans the path, refuses "..",
// resolves symlinks of the existing part and matches the result against
// the allowlist. That check works on names, and names can change before
// they are used, so the handlers then open the allowlist root the policy
// names, resolve the path beneath it (package beneath), confirm that what
// they opened is still in the allowlist, and read, create and rename only
// through those descriptors. Dry-run checks the policy and returns a
// placeholder with dry_run: true instead of touching the disk.
package fs

import (
	"context"
	"errors"
	iofs "io/fs"

	fsspec "github.com/kilnworks/kiln/capabilities/fs/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the capability family id of this package.
const Family = "fs"

// The node kinds of this family. No build registers them from init: a
// generated program registers those its workflow uses, so the others' code
// is left out; RegisterKinds registers them all.
var (
	KindReadFile  = runtime.NodeKind{Kind: "read_file", Family: Family, Prepare: prepareReadFile, SideEffect: true}
	KindWriteFile = runtime.NodeKind{Kind: "write_file", Family: Family, Prepare: prepareWriteFile, SideEffect: true}
	KindCreateDir = runtime.NodeKind{Kind: "create_dir", Family: Family, Prepare: prepareCreateDir, SideEffect: true}
)

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindReadFile, KindWriteFile, KindCreateDir)
}

// read_file: {path, content, bytes} of a UTF-8 regular file.
func prepareReadFile(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(fsspec.CheckReadFile(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	from := n.PathFrom
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		path, err := c.FromString("path_from", from)
		if err != nil {
			return runtime.Result{}, err
		}
		pol := c.Run.Policy()
		resolved, root, err := pol.FSTarget(policy.FSReadCheck, path)
		if err != nil {
			return runtime.Result{}, err
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"path": resolved, "dry_run": true}), nil
		}
		// Through the run's recording/replay seam: a replay reads the
		// recorded content, not the file.
		return runtime.Interact(ctx, c, "fs.read", map[string]any{"path": resolved}, func() (runtime.Result, error) {
			c.AuditEffect("fs.read", resolved)
			data, err := readFile(pol, resolved, root)
			if err != nil {
				return runtime.Result{}, failed(c, "read", resolved, err)
			}
			return runtime.Next(map[string]any{"path": resolved, "content": string(data), "bytes": len(data)}), nil
		})
	}, nil
}

// write_file: {path, bytes, written: true}. Strings are written as they
// are, any other value JSON-encoded; parent directories are created; the
// file is replaced atomically (temp file + rename), keeping the mode of an
// existing file.
func prepareWriteFile(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(fsspec.CheckWriteFile(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	pathFrom, contentFrom := n.PathFrom, n.ContentFrom
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		path, err := c.FromString("path_from", pathFrom)
		if err != nil {
			return runtime.Result{}, err
		}
		pol := c.Run.Policy()
		resolved, root, err := pol.FSTarget(policy.FSWriteCheck, path)
		if err != nil {
			return runtime.Result{}, err
		}
		v, ok := c.Lookup(contentFrom)
		if !ok {
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "content_from %q did not resolve to a value", contentFrom)
		}
		var data []byte
		if s, isString := v.(string); isString {
			data = []byte(s)
		} else if data, err = runtime.EncodeJSON(v); err != nil {
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "encode content: %v", err)
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"path": resolved, "bytes": len(data), "dry_run": true}), nil
		}
		perm, err := existingMode(resolved, root)
		if err != nil {
			return runtime.Result{}, failed(c, "write", resolved, err)
		}
		if err := c.Run.AddFSWrite(int64(len(data))); err != nil {
			return runtime.Result{}, err
		}
		// Through the run's recording/replay seam: a replay compares the
		// content it would write with the tape's, and writes nothing.
		req := map[string]any{"path": resolved, "content": string(data)}
		return runtime.Interact(ctx, c, "fs.write", req, func() (runtime.Result, error) {
			c.AuditEffect("fs.write", resolved)
			if err := writeFile(pol, resolved, root, data, perm); err != nil {
				return runtime.Result{}, failed(c, "write", resolved, err)
			}
			return runtime.Next(map[string]any{"path": resolved, "bytes": len(data), "written": true}), nil
		})
	}, nil
}

// create_dir: {path, created: true}; mkdir -p, idempotent.
func prepareCreateDir(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(fsspec.CheckCreateDir(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	from := n.PathFrom
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		path, err := c.FromString("path_from", from)
		if err != nil {
			return runtime.Result{}, err
		}
		pol := c.Run.Policy()
		resolved, root, err := pol.FSTarget(policy.FSWriteCheck, path)
		if err != nil {
			return runtime.Result{}, err
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"path": resolved, "dry_run": true}), nil
		}
		return runtime.Interact(ctx, c, "fs.create_dir", map[string]any{"path": resolved}, func() (runtime.Result, error) {
			c.AuditEffect("fs.create_dir", resolved)
			if err := createDir(pol, resolved, root); err != nil {
				return runtime.Result{}, failed(c, "create", resolved, err)
			}
			return runtime.Next(map[string]any{"path": resolved, "created": true}), nil
		})
	}, nil
}

// failed reports err of verb on path: a policy denial as it is (the engine
// counts and audits it), anything else as a tool error naming the path
// (and only that path: a temp file's name would only confuse).
func failed(c *runtime.Call, verb, path string, err error) error {
	if policy.IsDenial(err) {
		return err
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return c.Errorf(runtime.ClassTool, "%s %s: %v", verb, path, err)
}
