// Package runtime is what every sealed kiln binary links: the engine that
// runs a workflow, and the contracts the capability families plug into.
//
// A workflow (package workflow, validated by the generator) is compiled
// into a Program: every node's handler is prepared once, at load time, by
// the NodeKind its family registered (RegisterNode); a family's process
// hooks (flags, set-up, serve-mode listeners) register as an Extension.
// The engine walks the graph one node at a time from a start node,
// follows the out-edges whose `when` matches the handler's branch, and
// bounds every run: MaxSteps nodes, MaxCallDepth nested child workflows,
// the [budget] counters and the run deadline. Retries, policy denials,
// pauses (checkpoints under Engine.StateDir, durable.go) and every
// outcome are audited to a log/slog logger (audit.go).
//
// The runtime names no family: handlers reach what they need through Call
// (the node, the run's context, its Policy) and Services. Sub-packages
// hold the rest of a sealed binary: cli (the command line), policy (the
// [policy] allowlists), manifest, needs, discovery and sealed. The dialect
// itself, kind by kind, is in docs/reference.md.
package runtime
