// Package spec declares the mcp family: the call_mcp_tool and
// read_mcp_resource node kinds, the mcp.resource.* trigger types and the
// [[mcp_servers]] table (see docs/reference.md and docs/mcp.md). It holds
// data and checks only, so the generator links it without the family.
package spec

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// DefaultServer is the server a workflow without [[mcp_servers]] talks to:
// the one the process is given with --mcp-stdio.
const DefaultServer = "default"

// Trigger types.
const (
	TriggerUpdated = "mcp.resource.updated"
	TriggerCreated = "mcp.resource.created"
)

// Family is the mcp family's declaration.
var Family = spec.Family{
	ID: "mcp",
	Kinds: []spec.Kind{
		{
			Name: "call_mcp_tool",
			Doc:  "Calls a tool of an MCP server after the server's allow_tools and the policy's mcp.tool check. A tool result flagged isError takes the error branch.",
			Keys: []spec.Key{
				{Name: "tool", Type: spec.String, Required: true, Doc: "the tool name"},
				{Name: "args_from", Type: spec.Path, Doc: "the arguments, an object (absent or null: {})"},
				server,
			},
			Check:    CheckCallTool,
			Output:   "{tool, server, content, is_error, structured}",
			Branches: []string{"error"},
			Policy:   "mcp.tool",
		},
		{
			Name: "read_mcp_resource",
			Doc:  "Reads a resource of an MCP server after the server's allow_resources and the policy's mcp.resource check.",
			Keys: []spec.Key{
				{Name: "resource_from", Type: spec.Path, Required: true, Doc: "the resource URI (a string)"},
				server,
			},
			Check:  CheckReadResource,
			Output: "{uri, server, contents}",
			Policy: "mcp.resource",
		},
	},
	Triggers: []spec.Trigger{
		{
			Name:    TriggerCreated,
			Doc:     "Starts a run for each new resource matching the pattern that the server lists (resources/list_changed), one run at a time.",
			Keys:    triggerKeys,
			Check:   CheckTrigger,
			Payload: "{type, server, uri, resource_uri}",
			Policy:  "mcp.resource",
		},
		{
			Name:    TriggerUpdated,
			Doc:     "Subscribes to the resources matching the pattern and starts a run for each update notification, one run at a time.",
			Keys:    triggerKeys,
			Check:   CheckTrigger,
			Payload: "{type, server, uri, resource_uri}",
			Policy:  "mcp.resource",
		},
	},
	Check:    CheckServers,
	Needs:    needs,
	NeedsDoc: "for each [[mcp_servers]] entry (class mcp:<name>): the secrets its env passes and its headers and auth send, its TLS files (read-only), the host of its url and its auth.hosts",
}

var (
	server      = spec.Key{Name: "server", Type: spec.String, Doc: "a [[mcp_servers]] name (default: the only one, or the one named \"default\")"}
	triggerKeys = []spec.Key{
		{Name: "server", Type: spec.String, Required: true, Doc: "a [[mcp_servers]] name"},
		{Name: "resource", Type: spec.String, Required: true, Doc: "the resource URI pattern: exact, prefix* or prefix/**"},
	}
)

// CheckServer checks a node's or trigger's `server` key: a named server
// must be declared, or be the --mcp-stdio server "default" when none is.
func CheckServer(wf *workflow.Workflow, name string) []spec.Issue {
	var is spec.Issues
	switch {
	case name == "" || spec.MCPServer(wf, name):
	case len(wf.MCPServers) == 0 && name != DefaultServer:
		is.Add("unknown_mcp_server", "server %q is not declared in [[mcp_servers]] (none is declared; the --mcp-stdio server is %q)", name, DefaultServer)
	case len(wf.MCPServers) > 0:
		names := make([]string, len(wf.MCPServers))
		for i, s := range wf.MCPServers {
			names[i] = s.Name
		}
		is.Add("unknown_mcp_server", "server %q is not declared in [[mcp_servers]] (declared: %s)", name, strings.Join(names, ", "))
	}
	return is
}

// CheckCallTool checks a call_mcp_tool node.
func CheckCallTool(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("tool", n.Tool != "")
	return append(is, CheckServer(ctx.Workflow(), n.Server)...)
}

// CheckReadResource checks a read_mcp_resource node.
func CheckReadResource(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("resource_from", n.ResourceFrom != "")
	return append(is, CheckServer(ctx.Workflow(), n.Server)...)
}

// CheckTrigger checks an mcp.resource.* trigger.
func CheckTrigger(t *workflow.Trigger, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("server", t.Server != "")
	is.Require("resource", t.Resource != "")
	return append(is, CheckServer(ctx.Workflow(), t.Server)...)
}

// CheckServers checks [[mcp_servers]].
func CheckServers(wf *workflow.Workflow, _ spec.Context) []spec.Issue {
	var is spec.Issues
	seen := map[string]bool{}
	for i, s := range wf.MCPServers {
		where := is.Entry("mcp_servers", "mcp server", i, s.Name, seen, "duplicate_mcp_server")
		switch {
		case len(s.Command) == 0 && s.URL == "":
			is.Add("invalid_mcp_server", "%s: command (stdio) or url (streamable HTTP) is required", where)
		case len(s.Command) > 0 && s.URL != "":
			is.Add("invalid_mcp_server", "%s: set command or url, not both", where)
		case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
			is.Add("invalid_mcp_server", "%s: command[0] must name a program", where)
		case s.URL != "" && !rules.HTTPURL(s.URL):
			is.Add("invalid_mcp_server", "%s: url %q must be an http(s) URL", where, s.URL)
		}
		if len(s.Headers) > 0 && s.URL == "" {
			is.Add("invalid_mcp_server", "%s: headers apply to url servers only, not to stdio servers (command)", where)
		}
		for _, msg := range HeaderProblems(s.Headers) {
			is.Add("invalid_header", "%s: %s", where, msg)
		}
		for _, msg := range TLSProblems(s) {
			is.Add("invalid_mcp_server", "%s: %s", where, msg)
		}
		for _, msg := range AuthProblems(s, wf) {
			is.Add("invalid_mcp_auth", "%s: %s", where, msg)
		}
		for _, name := range HeaderSecrets(s.Headers) {
			if !spec.Secret(wf, name) {
				is.Add("unknown_secret", "%s: headers: secret %q is not declared in [[secrets]]", where, name)
			}
		}
		for _, v := range slices.Sorted(maps.Keys(s.Env)) {
			if !spec.EnvName(v) {
				is.Add("invalid_env_key", "%s: env %q is not an environment variable name", where, v)
			}
			if name := s.Env[v]; name != "" && !spec.Secret(wf, name) {
				is.Add("unknown_secret", "%s: env.%s %q is not declared in [[secrets]]", where, v, name)
			}
		}
	}
	return is
}

// needs: what each server is given and where it is reached; kiln starts
// and dials servers itself, outside the workflow's [policy].
func needs(wf *workflow.Workflow) []spec.Need {
	var out []spec.Need
	for _, m := range wf.MCPServers {
		class := "mcp:" + m.Name
		for _, v := range slices.Sorted(maps.Keys(m.Env)) {
			out = append(out, spec.Need{Class: class, Kind: spec.NeedSecret, Key: m.Env[v],
				Label: "secret passed to MCP server " + m.Name + " as " + v, Ungoverned: true})
		}
		for _, name := range HeaderSecrets(m.Headers) {
			out = append(out, spec.Need{Class: class, Kind: spec.NeedSecret, Key: name,
				Label: "secret sent to MCP server " + m.Name + " in a header", Ungoverned: true})
		}
		if a := m.Auth; a != nil && a.Secret != "" {
			out = append(out, spec.Need{Class: class, Kind: spec.NeedSecret, Key: a.Secret,
				Label: "OAuth2 token for MCP server " + m.Name, Ungoverned: true})
			for _, h := range a.Hosts {
				out = append(out, spec.Need{Class: class, Kind: spec.NeedNetwork, Host: strings.ToLower(h), Ungoverned: true})
			}
		}
		if t := m.TLS; t != nil {
			for _, f := range []string{t.CertFile, t.KeyFile, t.CAFile} {
				if f != "" {
					out = append(out, spec.Need{Class: class, Kind: spec.NeedFilesystem, Path: f, Mode: "ro",
						Label: "TLS file of MCP server " + m.Name, Ungoverned: true})
				}
			}
		}
		if h := rules.Hostname(m.URL); h != "" {
			out = append(out, spec.Need{Class: class, Kind: spec.NeedNetwork, Host: h, Ungoverned: true})
		}
	}
	return out
}

// reservedHeaders are set by the HTTP client and the MCP transport;
// declaring them would desynchronise framing, routing or the session.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Upgrade", "Trailer",
	"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// HeaderProblems checks a url server's headers as http_request headers
// are checked: RFC 9110 names, no CR, LF or NUL, and no placeholder other
// than {{secret:NAME}} (values never come from the run context).
func HeaderProblems(headers map[string]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		val := headers[name]
		switch {
		case !rules.IsHeaderName(name):
			out = append(out, fmt.Sprintf("header name %q is not a valid HTTP field name", name))
		case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(name)):
			out = append(out, fmt.Sprintf("header %s is set by the MCP client and cannot be declared", name))
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			out = append(out, fmt.Sprintf("header %s: value contains CR, LF or NUL", name))
		}
		if literalHasBraces(val) {
			out = append(out, fmt.Sprintf("header %s: header values take literals and {{secret:NAME}} placeholders only", name))
		}
	}
	return out
}

// literalHasBraces reports whether a header value's literal text (all
// but its {{secret:NAME}} placeholders) holds "{{" or "}}".
func literalHasBraces(val string) bool {
	var literal strings.Builder
	for _, part := range rules.SplitHeaderValue(val) {
		literal.WriteString(part.Text)
	}
	return strings.Contains(literal.String(), "{{") || strings.Contains(literal.String(), "}}")
}

// HeaderSecrets lists the secret names the headers' placeholders use,
// sorted and without repeats.
func HeaderSecrets(headers map[string]string) []string {
	var out []string
	for _, val := range headers {
		for _, part := range rules.SplitHeaderValue(val) {
			if part.Secret != "" {
				out = append(out, part.Secret)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TLSProblems checks a server's tls table: url servers over https only,
// cert_file and key_file together, at least one file.
func TLSProblems(s workflow.MCPServer) []string {
	t := s.TLS
	if t == nil {
		return nil
	}
	var out []string
	switch {
	case s.URL == "":
		out = append(out, "tls applies to url servers only, not to stdio servers (command)")
	case !strings.HasPrefix(strings.ToLower(s.URL), "https://"):
		out = append(out, fmt.Sprintf("tls needs an https url, not %q", s.URL))
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		out = append(out, "tls: cert_file and key_file go together")
	}
	if t.CertFile == "" && t.KeyFile == "" && t.CAFile == "" {
		out = append(out, "tls: set cert_file and key_file, ca_file, or both")
	}
	return out
}

// AuthProblems checks a server's auth table: a url server, kind oauth2,
// and a secret naming a [[secrets]] entry of wf of source oauth2. The
// token is the Authorization header, so headers must not set one too.
func AuthProblems(s workflow.MCPServer, wf *workflow.Workflow) []string {
	a := s.Auth
	if a == nil {
		return nil
	}
	var out []string
	if s.URL == "" {
		out = append(out, "auth applies to url servers only, not to stdio servers (command)")
	}
	if a.Kind != "oauth2" {
		out = append(out, fmt.Sprintf("auth.kind %q must be oauth2", a.Kind))
	}
	switch {
	case a.Secret == "":
		out = append(out, "auth.secret is required: the name of a [[secrets]] entry of source oauth2")
	default:
		src := ""
		for _, sec := range wf.Secrets {
			if sec.Name == a.Secret {
				src = sec.Source
			}
		}
		if src != "oauth2" {
			out = append(out, fmt.Sprintf("auth.secret %q must name a [[secrets]] entry of source oauth2", a.Secret))
		}
	}
	for _, h := range a.Hosts {
		if h == "" || strings.ContainsAny(h, "/:@ *") || rules.Hostname("https://"+h) != h {
			out = append(out, fmt.Sprintf("auth.hosts: %q is not a host name (no scheme, port or path)", h))
		}
	}
	for name := range s.Headers {
		if http.CanonicalHeaderKey(name) == "Authorization" {
			out = append(out, "set auth or an Authorization header, not both")
		}
	}
	return out
}
