package gen

import (
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// commonNodeKeys apply to every node kind.
var commonNodeKeys = []string{"id", "type", "retry"}

func (c *checker) checkNodes() {
	if len(c.wf.Nodes) == 0 {
		c.add("no_nodes", "workflow: at least one [[nodes]] entry is required")
	}
	seen := map[string]bool{}
	for i := range c.wf.Nodes {
		n := &c.wf.Nodes[i]
		if n.ID == "" {
			c.add("missing_field", "nodes[%d]: id is required", i)
		} else if seen[n.ID] {
			c.add("duplicate_node_id", "%s: id %q is declared more than once", nodeLabel(n), n.ID)
		}
		seen[n.ID] = true
		c.checkNode(n, i)
	}
}

// checkNode checks one node against its kind's declaration (the family's
// spec package): keys that do not belong, the retry policy, the syntax of
// its context paths, then the kind's own Check.
func (c *checker) checkNode(n *workflow.Node, i int) {
	where := nodeLabel(n)
	if n.ID == "" {
		where = fmt.Sprintf("nodes[%d] (%s)", i, n.Type)
	}
	kind, ok := all.Kind(n.Type)
	if !ok {
		c.unknownType(where, "node type", n.Type, all.Kinds())
		return
	}
	c.addAll(where, spec.NotAllowed(n, kind.Keys, commonNodeKeys...))
	c.checkRetry(where, n.Retry)
	c.addAll(where, spec.PathIssues(n, kind.Keys))
	c.addAll(where, kind.Check(n, c.ctx))
}

// unknownType reports a node's or trigger's type that is missing or that
// no family declares (unknown_node_type, unknown_trigger_type).
func (c *checker) unknownType(where, what, typ string, known []string) {
	if typ == "" {
		c.add("missing_field", "%s: type is required", where)
		return
	}
	c.add("unknown_"+strings.ReplaceAll(what, " ", "_"), "%s: unknown %s %q (known: %s)", where, what, typ, strings.Join(known, ", "))
}

func (c *checker) checkRetry(where string, r *workflow.Retry) {
	if r == nil {
		return
	}
	if r.MaxAttempts < 1 {
		c.add("invalid_retry", "%s: retry.max_attempts must be at least 1, got %d", where, r.MaxAttempts)
	}
	if r.BackoffMS != nil && *r.BackoffMS < 0 {
		c.add("invalid_retry", "%s: retry.backoff_ms must not be negative, got %d", where, *r.BackoffMS)
	}
	if r.On != "" && r.On != "any" && r.On != "transient" {
		c.add("invalid_retry", "%s: retry.on must be \"any\" or \"transient\", got %q", where, r.On)
	}
	if r.Jitter < 0 || r.Jitter > 1 {
		c.add("invalid_retry", "%s: retry.jitter must be within 0.0..1.0, got %v", where, r.Jitter)
	}
}
