// Package env is the capability family of read_env (docs/reference.md):
// it reads one environment variable, named literally in the workflow, after
// the policy's env.read check. Reading is not a side effect, so dry-run
// reads too.
package env

import (
	"context"
	"os"

	envspec "github.com/kilnworks/kiln/capabilities/env/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the capability family id of this package.
const Family = "env"

// KindReadEnv is the node kind of this family. No build registers it from
// init: a generated program registers it when its workflow uses it, and
// RegisterKinds registers it for binaries that link the whole family.
var KindReadEnv = runtime.NodeKind{Kind: "read_env", Family: Family, Prepare: prepareReadEnv}

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindReadEnv)
}

// read_env: {key, value}; unset: {key, value: null, missing: true}.
func prepareReadEnv(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(envspec.CheckReadEnv(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	key := n.Key
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		if err := c.Run.Policy().EnvRead(key); err != nil {
			return runtime.Result{}, err
		}
		// Through the run's recording/replay seam: a replay reads the
		// recorded value, not this process's environment.
		out, err := runtime.Interact(ctx, c, "env.read", map[string]any{"key": key}, func() (map[string]any, error) {
			v, ok := os.LookupEnv(key)
			if !ok {
				return map[string]any{"key": key, "value": nil, "missing": true}, nil
			}
			return map[string]any{"key": key, "value": v}, nil
		})
		if err != nil {
			return runtime.Result{}, err
		}
		return runtime.Next(out), nil
	}, nil
}
