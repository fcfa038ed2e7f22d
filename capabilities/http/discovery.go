package http

import (
	"net/http"
	"runtime/debug"

	"github.com/kilnworks/kiln/capabilities/catalog"
	httpspec "github.com/kilnworks/kiln/capabilities/http/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/discovery"
)

// Discovery endpoints: kiln's own document (what this binary can do and
// which limits it enforces), and the OpenWOP discovery document and agent
// inventory (openwop.go), with degraded[] listing the workflow's
// requires_capabilities keys no compiled family provides.
const (
	wellKnownPath = httpspec.KilnDiscoveryPath
	agentsPath    = httpspec.AgentsPath
)

// compiledFamilies is the set of catalog families linked into this binary:
// the families of the registered node kinds and of the registered
// extensions (trigger and serve families register no node kind).
func compiledFamilies() []string {
	set := map[string]bool{}
	for _, k := range runtime.RegisteredNodeKinds() {
		if id, ok := catalog.FamilyOfKind(k); ok {
			set[id] = true
		}
	}
	for _, e := range runtime.Extensions() {
		if _, ok := catalog.Lookup(e.Name); ok {
			set[e.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	return out
}

// kilnVersion is the version of the kiln module linked into the binary.
func kilnVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == "github.com/kilnworks/kiln" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/kilnworks/kiln" {
			return d.Version
		}
	}
	return "(devel)"
}

func (s *Server) discoveryInfo() discovery.Info {
	wf := s.host.Program.Workflow
	info := discovery.Info{
		Workflow:       wf,
		Version:        kilnVersion(),
		Families:       catalog.FamilyKeys(compiledFamilies()),
		NodeKinds:      runtime.RegisteredNodeKinds(),
		MaxSteps:       runtime.MaxSteps,
		MaxRequestBody: MaxBodyBytes,
		WireKey:        catalog.WireKey,
	}
	// The run CLI attaches what the build itself says (a sealed binary's
	// manifest: linked families, degraded keys); it wins over guessing
	// from registrations, which miss families that register neither a
	// node kind nor an extension (oidc).
	if self, ok := discovery.Attached(s.host); ok {
		if len(self.Families) > 0 {
			info.Families = self.Families
		}
		if self.Version != "" {
			info.Version = self.Version
		}
		info.BuildDegraded = self.Degraded
	}
	return info
}

func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	info := s.discoveryInfo()
	doc := discovery.Build(info)
	// The deadline each request's run actually gets: --timeout-secs when
	// given (it replaces [budget].max_run_time_secs), else the budget.
	doc.Limits.MaxRunDurationMS = nil
	if t := s.runTimeout(); t > 0 {
		ms := t.Milliseconds()
		doc.Limits.MaxRunDurationMS = &ms
	}
	switch r.URL.Path {
	case openWOPPath:
		writeDoc(w, openWOPDocument(info, doc))
	case agentsPath:
		writeDoc(w, openWOPInventory{Agents: []openWOPAgent{openWOPAgentOf(info)}, Total: 1})
	default:
		writeDoc(w, doc)
	}
}
