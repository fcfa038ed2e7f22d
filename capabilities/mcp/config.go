package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	mcpspec "github.com/kilnworks/kiln/capabilities/mcp/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// DefaultServer names the server a node uses when the workflow declares no
// [[mcp_servers]]: the one --mcp-stdio starts.
const DefaultServer = mcpspec.DefaultServer

// Trigger types of this family.
const (
	TriggerUpdated = mcpspec.TriggerUpdated
	TriggerCreated = mcpspec.TriggerCreated
)

// Server is one MCP server the pool can reach.
type Server struct {
	Name           string
	Command        []string // stdio: argv
	URL            string   // streamable HTTP endpoint
	AllowTools     []string
	AllowResources []string
	Env            map[string]string // VAR = SECRET_NAME (stdio only)
	// Headers are sent on every request to the url server's own origin:
	// literals and {{secret:NAME}} placeholders (url only).
	Headers map[string]string
	TLS     *workflow.MCPTLS // client certificate and CAs (url only)
	// OAuth2 names the [[secrets]] oauth2 entry whose token is the
	// server's bearer (url only).
	OAuth2 string
	// AuthHosts are the hosts besides the url's that protected-resource
	// discovery may reach.
	AuthHosts []string
	// Dir is the declaring workflow's directory: a relative command path
	// is tried there first.
	Dir string
	// Legacy marks the --mcp-stdio server: it has no allowlists of its
	// own, [policy.mcp] alone bounds it.
	Legacy bool
}

// serverOf converts a [[mcp_servers]] declaration.
func serverOf(wf *workflow.Workflow, s workflow.MCPServer) Server {
	dir := ""
	if wf.Source != "" {
		dir = filepath.Dir(wf.Source)
	}
	oauth, hosts := "", []string(nil)
	if s.Auth != nil {
		oauth, hosts = s.Auth.Secret, s.Auth.Hosts
	}
	return Server{Name: s.Name, Command: s.Command, URL: s.URL, AllowTools: s.AllowTools,
		AllowResources: s.AllowResources, Env: s.Env, Headers: s.Headers, TLS: s.TLS, OAuth2: oauth, AuthHosts: hosts, Dir: dir}
}

// ToolAllowed checks the server's own allow_tools. A name with a dot
// segment is refused first (policy.CheckMCPTarget), also for the legacy
// server.
func (s Server) ToolAllowed(tool string) error {
	if err := policy.CheckMCPTarget("mcp.tool", tool); err != nil {
		return err
	}
	if s.Legacy || policy.MatchAny(s.AllowTools, tool) {
		return nil
	}
	return &policy.Denial{What: "mcp.tool", Target: s.Name + "/" + tool,
		Reason: fmt.Sprintf("not in allow_tools of [[mcp_servers]] %q%s", s.Name, emptyNote(s.AllowTools))}
}

// ResourceAllowed checks the server's own allow_resources, for reads and
// subscriptions. A URI with a dot segment is refused first
// (policy.CheckMCPTarget), also for the legacy server.
func (s Server) ResourceAllowed(uri string) error {
	if err := policy.CheckMCPTarget("mcp.resource", uri); err != nil {
		return err
	}
	if s.Legacy || policy.MatchAny(s.AllowResources, uri) {
		return nil
	}
	return &policy.Denial{What: "mcp.resource", Target: s.Name + " " + uri,
		Reason: fmt.Sprintf("not in allow_resources of [[mcp_servers]] %q%s", s.Name, emptyNote(s.AllowResources))}
}

func emptyNote(list []string) string {
	if len(list) == 0 {
		return " (the list is empty: nothing is allowed)"
	}
	return ""
}

// policyServer is the server name [policy.mcp] sees: the legacy server
// is anonymous there, so a reference workflow whose informational
// `servers` list names something else keeps working.
func (s Server) policyServer() string {
	if s.Legacy {
		return ""
	}
	return s.Name
}

// CheckPattern checks one allowlist pattern against the matcher grammar
// of runtime/policy.Match: "*", "prefix/**", "prefix/*", "prefix*" or an
// exact string. A '*' anywhere else would silently match nothing, so it is
// refused.
func CheckPattern(p string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New("empty pattern")
	}
	if strings.TrimSpace(p) != p {
		return fmt.Errorf("pattern %q has leading or trailing spaces", p)
	}
	body := p
	switch {
	case p == "*":
		return nil
	case strings.HasSuffix(p, "/**"):
		body = strings.TrimSuffix(p, "/**")
	case strings.HasSuffix(p, "*"):
		body = strings.TrimSuffix(p, "*")
	}
	if strings.Contains(body, "*") {
		return fmt.Errorf("pattern %q: '*' may only end a pattern (\"*\", \"prefix/**\", \"prefix/*\" or \"prefix*\"); there is no other globbing", p)
	}
	return nil
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks a workflow's MCP declarations: each [[mcp_servers]]
// entry, the allowlist patterns of the servers and of [policy.mcp], every
// MCP node's server reference, and every MCP trigger. Children are not
// visited (each is prepared, and validated, on its own).
func Validate(wf *workflow.Workflow) error {
	errs := []error{validateConfig(wf)}
	for _, n := range wf.Nodes {
		if n.Type != "call_mcp_tool" && n.Type != "read_mcp_resource" {
			continue
		}
		if _, err := SelectServer(wf, n.Server); err != nil {
			errs = append(errs, fmt.Errorf("node %s (%s): %v", n.ID, n.Type, err))
		}
	}
	return errors.Join(errs...)
}

// validateConfig is Validate without the per-node checks (a node's
// Prepare checks its own reference).
func validateConfig(wf *workflow.Workflow) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for i, s := range wf.MCPServers {
		where := fmt.Sprintf("[[mcp_servers]] %q", s.Name)
		if s.Name == "" {
			where = fmt.Sprintf("mcp_servers[%d]", i)
			bad("%s: name is required", where)
		} else if seen[s.Name] {
			bad("%s: declared more than once", where)
		}
		seen[s.Name] = true
		switch {
		case len(s.Command) == 0 && s.URL == "":
			bad("%s: command (stdio) or url (streamable HTTP) is required", where)
		case len(s.Command) > 0 && s.URL != "":
			bad("%s: set command or url, not both", where)
		case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
			bad("%s: command[0] must name a program", where)
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("%s: url %q must be an absolute http(s) URL", where, s.URL)
			} else if u.User != nil {
				bad("%s: url must not carry credentials", where)
			}
			if len(s.Env) > 0 {
				bad("%s: env applies to stdio servers (command) only, not to url servers", where)
			}
		}
		if len(s.Headers) > 0 && s.URL == "" {
			bad("%s: headers apply to url servers only, not to stdio servers (command)", where)
		}
		for _, msg := range mcpspec.HeaderProblems(s.Headers) {
			bad("%s: %s", where, msg)
		}
		for _, msg := range mcpspec.TLSProblems(s) {
			bad("%s: %s", where, msg)
		}
		for _, msg := range mcpspec.AuthProblems(s, wf) {
			bad("%s: %s", where, msg)
		}
		for _, v := range runtime.SortedKeys(s.Env) {
			if !envNameRe.MatchString(v) {
				bad("%s: env key %q is not an environment variable name", where, v)
			}
			if strings.TrimSpace(s.Env[v]) == "" {
				bad("%s: env.%s must name a secret", where, v)
			}
		}
		for _, list := range []struct {
			key string
			v   []string
		}{{"allow_tools", s.AllowTools}, {"allow_resources", s.AllowResources}} {
			for _, p := range list.v {
				if err := CheckPattern(p); err != nil {
					bad("%s: %s: %v", where, list.key, err)
				}
			}
		}
	}
	if wf.Policy != nil && wf.Policy.MCP != nil {
		m := wf.Policy.MCP
		for _, list := range []struct {
			key string
			v   []string
		}{{"servers", m.Servers}, {"tools", m.Tools}, {"resources", m.Resources}} {
			for _, p := range list.v {
				if err := CheckPattern(p); err != nil {
					bad("[policy.mcp]: %s: %v", list.key, err)
				}
			}
		}
	}
	for i, t := range wf.Triggers {
		if t.Type != TriggerUpdated && t.Type != TriggerCreated {
			continue
		}
		where := fmt.Sprintf("triggers[%d] (%s)", i, t.Type)
		if _, err := SelectServer(wf, t.Server); err != nil {
			bad("%s: %v", where, err)
		}
		if t.Resource == "" {
			bad("%s: resource is required", where)
		} else if err := CheckPattern(t.Resource); err != nil {
			bad("%s: resource: %v", where, err)
		} else if err := policy.CheckMCPTarget("mcp.resource", t.Resource); err != nil {
			bad("%s: resource: %v", where, err)
		}
		if t.StartNode == "" {
			bad("%s: start_node is required", where)
		}
	}
	return errors.Join(errs...)
}

// SelectServer resolves a node's or trigger's `server` key: the named
// server, else the only declared one, else "default". Several servers and
// none named "default" is ambiguous. With no [[mcp_servers]] the only name
// is "default" (the --mcp-stdio server).
func SelectServer(wf *workflow.Workflow, name string) (string, error) {
	declared := make([]string, 0, len(wf.MCPServers))
	for _, s := range wf.MCPServers {
		declared = append(declared, s.Name)
	}
	if name != "" {
		if err := spec.Err(mcpspec.CheckServer(wf, name)); err != nil {
			return "", err
		}
		return name, nil
	}
	switch len(declared) {
	case 0:
		return DefaultServer, nil
	case 1:
		return declared[0], nil
	}
	for _, d := range declared {
		if d == DefaultServer {
			return d, nil
		}
	}
	return "", fmt.Errorf("ambiguous server: %d servers are declared (%s) and none is named %q; set server", len(declared), strings.Join(declared, ", "), DefaultServer)
}

// lookupServer returns the declaration a prepared node uses: a declared
// server, or the legacy one.
func lookupServer(wf *workflow.Workflow, name string) Server {
	for _, s := range wf.MCPServers {
		if s.Name == name {
			return serverOf(wf, s)
		}
	}
	return Server{Name: name, Legacy: true}
}

// collectServers gathers the declared servers of p and its children; one
// name declared twice with different settings is an error (they would
// share one connection).
func collectServers(p *runtime.Program, into map[string]Server) error {
	wf := p.Workflow
	for _, d := range wf.MCPServers {
		s := serverOf(wf, d)
		if prev, ok := into[s.Name]; ok && !sameServer(prev, s) {
			return fmt.Errorf("[[mcp_servers]] %q is declared twice with different settings (workflow %s)", s.Name, wf.Name)
		}
		into[s.Name] = s
	}
	for _, path := range runtime.SortedKeys(p.Children) {
		if err := collectServers(p.Children[path], into); err != nil {
			return err
		}
	}
	return nil
}

func sameServer(a, b Server) bool {
	a.Dir, b.Dir = "", ""
	return reflect.DeepEqual(a, b)
}

// validateTree runs Validate on p and every child.
func validateTree(p *runtime.Program) error {
	if err := Validate(p.Workflow); err != nil {
		return fmt.Errorf("workflow %s: %w", p.Workflow.Name, err)
	}
	for _, path := range runtime.SortedKeys(p.Children) {
		if err := validateTree(p.Children[path]); err != nil {
			return err
		}
	}
	return nil
}

// splitCommand splits the --mcp-stdio value into argv: words separated by
// spaces, with single or double quotes grouping and backslash escaping
// outside single quotes. There is no other shell syntax.
func splitCommand(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord, quote, escaped := false, rune(0), false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if escaped || quote != 0 {
		return nil, errors.New("unterminated quote or escape")
	}
	if inWord {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, errors.New("empty command")
	}
	return args, nil
}
