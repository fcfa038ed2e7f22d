package http

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/capabilities/catalog"
	httpspec "github.com/kilnworks/kiln/capabilities/http/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/discovery"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The OpenWOP documents (docs/openwop.md): the discovery document an
// OpenWOP client reads capability keys and limits from, and the agent
// inventory. They are projections of the same discovery.Info as
// /.well-known/kiln, so the two never disagree.
const (
	openWOPPath = httpspec.OpenWOPPath
	agentPrefix = agentsPath + "/"
	// openWOPProtocol is the OpenWOP protocol version the documents follow.
	openWOPProtocol = "1.0"
	// toolScope names kiln's node kinds in a tool allowlist: OpenWOP's
	// <vendor>.<host> scope for host tools.
	toolScope = "kilnworks.kiln:"
)

type openWOPDoc struct {
	ProtocolVersion     string          `json:"protocolVersion"`
	SupportedEnvelopes  []string        `json:"supportedEnvelopes"`
	SchemaVersions      map[string]int  `json:"schemaVersions"`
	Limits              openWOPLimits   `json:"limits"`
	RuntimeCapabilities []string        `json:"runtimeCapabilities"`
	Agents              openWOPAgentsOn `json:"agents"`
}

// openWOPLimits: kiln speaks no envelopes, so the three envelope limits the
// schema requires are 0; the optional ones are the limits kiln enforces.
type openWOPLimits struct {
	ClarificationRounds int    `json:"clarificationRounds"`
	SchemaRounds        int    `json:"schemaRounds"`
	EnvelopesPerTurn    int    `json:"envelopesPerTurn"`
	MaxNodeExecutions   int    `json:"maxNodeExecutions"`
	MaxRunDurationMs    *int64 `json:"maxRunDurationMs,omitempty"`
	MaxLoopIterations   int    `json:"maxLoopIterations,omitempty"`
}

type openWOPAgentsOn struct {
	ManifestRuntime struct {
		Supported bool `json:"supported"`
	} `json:"manifestRuntime"`
}

// openWOPAgent is one AgentInventoryEntry; the schema forbids other fields.
type openWOPAgent struct {
	AgentID           string   `json:"agentId"`
	Persona           string   `json:"persona"`
	Label             string   `json:"label"`
	Description       string   `json:"description,omitempty"`
	ModelClass        string   `json:"modelClass"`
	PackName          string   `json:"packName"`
	PackVersion       string   `json:"packVersion"`
	ToolAllowlist     []string `json:"toolAllowlist"`
	HasHandoffSchemas bool     `json:"hasHandoffSchemas"`
	Degraded          []string `json:"degraded,omitempty"` // omitted when every requirement is met
}

type openWOPInventory struct {
	Agents []openWOPAgent `json:"agents"`
	Total  int            `json:"total"`
}

// openWOPDocument builds GET /.well-known/openwop from what /.well-known/kiln
// reports, so the limits are the same numbers.
func openWOPDocument(info discovery.Info, kiln *discovery.Document) *openWOPDoc {
	doc := &openWOPDoc{
		ProtocolVersion:     openWOPProtocol,
		SupportedEnvelopes:  []string{},
		SchemaVersions:      map[string]int{},
		RuntimeCapabilities: advertised(info),
		Limits: openWOPLimits{
			MaxNodeExecutions: kiln.Limits.MaxNodeExecutions,
			MaxRunDurationMs:  kiln.Limits.MaxRunDurationMS,
			MaxLoopIterations: kiln.Limits.MaxLoopIterations,
		},
	}
	doc.Agents.ManifestRuntime.Supported = true
	return doc
}

// advertised is the binary's capability keys in their OpenWOP form, sorted.
func advertised(info discovery.Info) []string {
	keys := catalog.WireKeys(info.Keys())
	sort.Strings(keys)
	return keys
}

// openWOPAgentOf projects the workflow onto the one agent the binary serves
// (the mapping is documented in docs/openwop.md).
func openWOPAgentOf(info discovery.Info) openWOPAgent {
	wf := info.Workflow
	version := info.Version
	if d := wf.Digest; d != "" {
		version += "+" + d[:min(len(d), 12)]
	}
	return openWOPAgent{
		AgentID:           agentID(wf.Name),
		Persona:           wf.Name,
		Label:             wf.Name,
		Description:       wf.Description,
		ModelClass:        modelClass(wf),
		PackName:          wf.Name,
		PackVersion:       version,
		ToolAllowlist:     toolAllowlist(info),
		HasHandoffSchemas: hasHandoffSchemas(wf),
		Degraded:          agentDegraded(info),
	}
}

// agentID puts the workflow name in OpenWOP's local namespace
// (local.kiln.<name>), lower-cased, with any other character than
// [a-z0-9_-] replaced by "-".
func agentID(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			b[i] = '-'
		}
	}
	if len(b) == 0 || b[0] < 'a' || b[0] > 'z' {
		b = append([]byte("w"), b...)
	}
	return "local.kiln." + string(b)
}

// modelClass: "reasoning" for a workflow tree with an agent loop (the model
// plans tool calls), "general" otherwise, including no intelligence
// backend at all.
func modelClass(wf *workflow.Workflow) string {
	for _, w := range workflow.Tree(wf) {
		if w.Intelligence == nil || len(w.Intelligence.Backends) == 0 {
			continue
		}
		for _, n := range w.Nodes {
			if n.Type == "agent_loop" {
				return "reasoning"
			}
		}
	}
	return "general"
}

// toolAllowlist is what the agent can actually invoke: the node kinds its
// tree uses (nodes and agent-loop tools) that this binary has a handler
// for, and the MCP tools its servers allow, when the MCP family is linked
// and [policy.mcp] admits the server and the tool (no [policy.mcp]: none,
// deny by default). MCP entries are the server's allow_tools patterns, as
// written.
func toolAllowlist(info discovery.Info) []string {
	registered := map[string]bool{}
	for _, k := range runtime.RegisteredNodeKinds() {
		registered[k] = true
	}
	_, mcpLinked := info.Families["mcp"]
	set := map[string]bool{}
	for _, w := range workflow.Tree(info.Workflow) {
		for _, n := range w.Nodes {
			for _, kind := range append([]string{n.Type}, n.Tools...) {
				if registered[kind] {
					set[toolScope+kind] = true
				}
			}
		}
		if !mcpLinked || w.Policy == nil || w.Policy.MCP == nil || len(w.Policy.MCP.Tools) == 0 {
			continue
		}
		for _, s := range w.MCPServers {
			if servers := w.Policy.MCP.Servers; len(servers) > 0 && !policy.MatchAny(servers, s.Name) {
				continue
			}
			for _, t := range s.AllowTools {
				// A server pattern [policy.mcp].tools does not admit, read
				// as a name, is left out (the policy refuses its calls).
				if policy.MatchAny(w.Policy.MCP.Tools, t) {
					set["mcp:"+s.Name+"/"+t] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hasHandoffSchemas: a route validates its input against input_schema, or
// a node validates its output against output_schema.
func hasHandoffSchemas(wf *workflow.Workflow) bool {
	for _, w := range workflow.Tree(wf) {
		for _, r := range w.HTTPRoutes {
			if r.InputSchema != "" {
				return true
			}
		}
		for _, n := range w.Nodes {
			if n.OutputSchema != "" {
				return true
			}
		}
	}
	return false
}

// agentDegraded lists the requires_capabilities keys this binary does not
// provide, as the workflow wrote them, and the keys of the families the
// build left out, in their OpenWOP form; never a key the binary advertises.
func agentDegraded(info discovery.Info) []string {
	have := info.Provided()
	required := info.Required()
	set := map[string]bool{}
	for _, k := range required {
		if !have[k] {
			set[k] = true
		}
	}
	for _, k := range info.BuildDegraded {
		w := k
		if _, isKey := catalog.FamilyOfKey(k); isKey {
			w = catalog.WireKey(k)
		}
		if !set[k] && !set[w] && !have[w] && !have[k] {
			set[w] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// serveAgent answers GET /v1/agents/{agentId}: the entry, or 404 with a
// JSON error naming the id.
func (s *Server) serveAgent(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, agentPrefix)
	a := openWOPAgentOf(s.discoveryInfo())
	if id != a.AgentID {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"code": "agent_not_found", "message": "no agent " + strconv.Quote(id) + " is installed",
			"details": map[string]any{"agentId": id}}})
		return
	}
	writeDoc(w, a)
}

func writeDoc(w http.ResponseWriter, v any) {
	body, err := runtime.EncodeJSON(v)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "internal error"})
		return
	}
	write(w, http.StatusOK, "application/json", body)
}
