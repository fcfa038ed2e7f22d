// Package discovery builds kiln's own document a serving binary publishes
// about itself, GET /.well-known/kiln: what is compiled in, which limits are
// enforced and which required capability keys it does not provide. The
// OpenWOP documents (docs/openwop.md) are built by the http family from the
// same Info, so that their code is linked only where they are served.
package discovery

import (
	"sort"

	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// ProtocolVersion is the version of the discovery document's shape.
const ProtocolVersion = "kiln.discovery/v1"

// Info is what the binary knows about itself.
type Info struct {
	Workflow       *workflow.Workflow
	Version        string              // kiln version the binary was built with
	Families       map[string][]string // compiled family id -> capability keys it provides
	NodeKinds      []string            // node kinds with a registered handler
	MaxSteps       int                 // engine step cap
	MaxRequestBody int64               // HTTP body cap in bytes
	// BuildDegraded are capability keys the build deliberately left out
	// (the manifest's degraded[]); they are listed even when the workflow
	// does not name them in requires_capabilities.
	BuildDegraded []string
	// WireKey, when set, gives a key's OpenWOP identifier: a workflow may
	// require either form, and a provided key is met in both.
	WireKey func(string) string
}

// Limits are the limits actually enforced.
type Limits struct {
	MaxNodeExecutions   int    `json:"max_node_executions"`
	MaxRunDurationMS    *int64 `json:"max_run_duration_ms"`
	MaxRequestBodyBytes int64  `json:"max_request_body_bytes"`
	MaxLoopIterations   int    `json:"max_loop_iterations"`
	MaxLLMTokens        *int64 `json:"max_llm_tokens"`
}

// Family is one compiled capability family.
type Family struct {
	Supported bool     `json:"supported"`
	Keys      []string `json:"keys"`
}

// Document is the /.well-known/kiln body.
type Document struct {
	Protocol     string            `json:"protocol"`
	Workflow     string            `json:"workflow"`
	Digest       string            `json:"digest,omitempty"`
	Version      string            `json:"version"`
	Capabilities map[string]Family `json:"capabilities"`
	Keys         []string          `json:"capability_keys"`
	NodeKinds    []string          `json:"node_kinds"`
	Limits       Limits            `json:"limits"`
	Agents       AgentsBlock       `json:"agents"`
	Degraded     []string          `json:"degraded,omitempty"`
	// Sandbox is the Landlock confinement in force (docs/sandbox.md).
	Sandbox *confine.Report `json:"sandbox,omitempty"`
}

// AgentsBlock advertises the manifest-runtime floor (docs/needs.md).
type AgentsBlock struct {
	Supported       bool            `json:"supported"`
	ManifestRuntime ManifestRuntime `json:"manifestRuntime"`
}

type ManifestRuntime struct {
	Supported bool `json:"supported"`
}

// Keys returns every capability key the compiled families provide, sorted.
func (in Info) Keys() []string {
	set := map[string]bool{}
	for _, keys := range in.Families {
		for _, k := range keys {
			set[k] = true
		}
	}
	return sortedSet(set)
}

// Provided returns the set of keys the compiled families provide, in both
// their catalog and their OpenWOP forms.
func (in Info) Provided() map[string]bool {
	have := map[string]bool{}
	for _, k := range in.Keys() {
		have[k] = true
		if in.WireKey != nil {
			have[in.WireKey(k)] = true
		}
	}
	return have
}

// Required returns the requires_capabilities keys of the workflow tree,
// sorted.
func (in Info) Required() []string {
	set := map[string]bool{}
	for _, w := range workflow.Tree(in.Workflow) {
		for _, k := range w.RequiresCapabilities {
			set[k] = true
		}
	}
	return sortedSet(set)
}

// Degraded lists the workflow tree's requires_capabilities keys that no
// compiled family provides: visible, never silent.
func (in Info) Degraded() []string {
	have := in.Provided()
	set := map[string]bool{}
	for _, k := range in.Required() {
		if !have[k] {
			set[k] = true
		}
	}
	for _, k := range in.BuildDegraded {
		set[k] = true
	}
	if len(set) == 0 {
		return nil
	}
	return sortedSet(set)
}

// Build returns the discovery document.
func Build(in Info) *Document {
	wf := in.Workflow
	caps := map[string]Family{}
	for id, keys := range in.Families {
		k := append([]string{}, keys...)
		sort.Strings(k)
		caps[id] = Family{Supported: true, Keys: k}
	}
	kinds := append([]string{}, in.NodeKinds...)
	sort.Strings(kinds)
	lim := Limits{MaxNodeExecutions: in.MaxSteps, MaxRequestBodyBytes: in.MaxRequestBody}
	if b := wf.Budget; b != nil {
		if b.MaxRunTimeSecs > 0 {
			ms := b.MaxRunTimeSecs * 1000
			lim.MaxRunDurationMS = &ms
		}
		if b.MaxLLMTokens > 0 {
			t := b.MaxLLMTokens
			lim.MaxLLMTokens = &t
		}
	}
	lim.MaxLoopIterations = maxLoop(wf, map[*workflow.Workflow]bool{})
	return &Document{
		Protocol:     ProtocolVersion,
		Workflow:     wf.Name,
		Digest:       wf.Digest,
		Version:      in.Version,
		Capabilities: caps,
		Keys:         in.Keys(),
		NodeKinds:    kinds,
		Limits:       lim,
		Agents:       AgentsBlock{Supported: true, ManifestRuntime: ManifestRuntime{Supported: true}},
		Degraded:     in.Degraded(),
		Sandbox:      confine.Current(),
	}
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxLoop is the largest loop-edge bound in wf and every child workflow it
// calls (a child's loop runs inside the parent's run).
func maxLoop(wf *workflow.Workflow, seen map[*workflow.Workflow]bool) int {
	if wf == nil || seen[wf] {
		return 0
	}
	seen[wf] = true
	n := 0
	for _, e := range wf.Edges {
		if e.MaxIterations != nil && *e.MaxIterations > n {
			n = *e.MaxIterations
		}
	}
	for _, c := range wf.Children {
		n = max(n, maxLoop(c, seen))
	}
	return n
}
