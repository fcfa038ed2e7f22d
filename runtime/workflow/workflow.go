// Package workflow holds the plain Go types of a kiln workflow: every table
// and node kind of the TOML dialect (docs/reference.md).
//
// The same types are filled by the strict TOML loader in package gen (for
// `kiln run`) and emitted as Go composite literals into sealed binaries, so
// they hold data only: no behaviour, no unexported state, no interfaces.
// Optional scalars whose zero value is meaningful are pointers, so the
// validator can tell "absent" from "set to zero".
package workflow

// Workflow is one validated workflow document.
type Workflow struct {
	Name                 string   `toml:"name"`
	Description          string   `toml:"description"`
	RequiresCapabilities []string `toml:"requires_capabilities"`

	StartNodes []StartNode `toml:"start_nodes"`
	Triggers   []Trigger   `toml:"triggers"`
	HTTPRoutes []HTTPRoute `toml:"http_routes"`
	Nodes      []Node      `toml:"nodes"`
	Edges      []Edge      `toml:"edges"`

	Policy       *Policy       `toml:"policy"`
	Auth         *Auth         `toml:"auth"`
	Server       *Server       `toml:"server"`
	Logging      *Logging      `toml:"logging"`
	Signing      *Signing      `toml:"signing"`
	Budget       *Budget       `toml:"budget"`
	MCPServers   []MCPServer   `toml:"mcp_servers"`
	Intelligence *Intelligence `toml:"intelligence"`
	Secrets      []Secret      `toml:"secrets"`
	Sandbox      *Sandbox      `toml:"sandbox"`
	State        *State        `toml:"state"`

	// Filled by the loader, never by TOML.

	// Source is the path the workflow was read from ("" when compiled in).
	Source string `toml:"-"`
	// Digest is the hex SHA-256 of the exact source bytes.
	Digest string `toml:"-"`
	// Children maps the workflow path a call/parallel/map node declares
	// (exactly as written) to the loaded, validated child workflow.
	Children map[string]*Workflow `toml:"-"`
	// Assets maps a file path the workflow declares (output_schema,
	// input_schema, jwks_file, prompt files; exactly as written) to its
	// bytes, read once at load time. Sealed binaries embed them, so nothing
	// is read from disk at run time.
	Assets map[string][]byte `toml:"-"`
}

// StartNode is a named entry point ([[start_nodes]]).
type StartNode struct {
	Name      string `toml:"name"`
	Source    string `toml:"source"` // manual | http | event
	EntryNode string `toml:"entry_node"`
}

// Trigger is one [[triggers]] entry; Type selects which fields apply.
type Trigger struct {
	Type      string `toml:"type"` // cron | interval | fs_watch | mcp.resource.updated | mcp.resource.created | internal.event
	StartNode string `toml:"start_node"`

	Schedule string `toml:"schedule"` // cron
	Every    string `toml:"every"`    // interval

	Path       string   `toml:"path"` // fs_watch
	Recursive  bool     `toml:"recursive"`
	Events     []string `toml:"events"`
	DebounceMS *int     `toml:"debounce_ms"`

	Server   string `toml:"server"`   // mcp.resource.*
	Resource string `toml:"resource"` // mcp.resource.*

	Name string `toml:"name"` // internal.event
}

// HTTPRoute is one [[http_routes]] entry.
type HTTPRoute struct {
	Method             string     `toml:"method"`
	Path               string     `toml:"path"`
	StartNode          string     `toml:"start_node"`
	InputSchema        string     `toml:"input_schema"`
	Auth               string     `toml:"auth"` // none | kind | kind:name | mtls
	RateLimit          *RateLimit `toml:"rate_limit"`
	IdempotencyKey     string     `toml:"idempotency_key"`
	IdempotencyTTLSecs *int       `toml:"idempotency_ttl_secs"`
	// Headers are the request headers the run sees in trigger.headers;
	// no other header reaches it.
	Headers []string `toml:"headers"`
	// Reply is "sync" (default: the reply waits for the run) or "async"
	// (202 at once, status at GET /v1/runs/{id}, kept RunRetentionSecs).
	Reply            string `toml:"reply"`
	RunRetentionSecs *int   `toml:"run_retention_secs"`
}

// RateLimit is a per-route token bucket.
type RateLimit struct {
	Capacity  int     `toml:"capacity"`
	PerSecond float64 `toml:"per_second"`
}

// Retry is a node's retry policy.
type Retry struct {
	MaxAttempts int     `toml:"max_attempts"`
	BackoffMS   *int    `toml:"backoff_ms"` // default 100
	On          string  `toml:"on"`         // any | transient (default any)
	Jitter      float64 `toml:"jitter"`
}

// Branch is one sub-workflow of a parallel node.
type Branch struct {
	Workflow  string `toml:"workflow"`
	InputFrom string `toml:"input_from"`
	Start     string `toml:"start"`
}

// Node is one [[nodes]] entry. Type selects which of the per-kind fields
// apply; the validator rejects fields that do not belong to the kind.
type Node struct {
	ID    string `toml:"id"`
	Type  string `toml:"type"`
	Retry *Retry `toml:"retry"`

	// Context paths (dotted) shared by many kinds.
	InputFrom    string `toml:"input_from"`
	PathFrom     string `toml:"path_from"`
	ContentFrom  string `toml:"content_from"`
	ResourceFrom string `toml:"resource_from"`
	LeftFrom     string `toml:"left_from"`
	RightFrom    string `toml:"right_from"`
	URLFrom      string `toml:"url_from"`
	BodyFrom     string `toml:"body_from"`
	ArgsFrom     string `toml:"args_from"`
	ItemsFrom    string `toml:"items_from"`
	Expr         string `toml:"expr"`

	// read_env
	Key string `toml:"key"`
	// json_select
	Path string `toml:"path"`
	// template_render
	Template string `toml:"template"`

	// llm_infer, agent_loop
	Backend          string   `toml:"backend"`
	Prompt           string   `toml:"prompt"`
	PromptFile       string   `toml:"prompt_file"` // extension: prompt read from a file at load time
	OutputSchema     string   `toml:"output_schema"`
	OutputRepairs    *int     `toml:"output_repairs"`
	MaxSteps         *int     `toml:"max_steps"`
	Tools            []string `toml:"tools"`
	Instructions     string   `toml:"instructions"`
	InstructionsFrom string   `toml:"instructions_from"`
	MaxTokens        *int     `toml:"max_tokens"`

	// http_request
	Method  string            `toml:"method"`
	Headers map[string]string `toml:"headers"`

	// call_mcp_tool, read_mcp_resource
	Tool   string `toml:"tool"`
	Server string `toml:"server"`

	// shell_run
	Command     string `toml:"command"`
	TimeoutSecs *int   `toml:"timeout_secs"`

	// call, parallel, map
	Workflow      string   `toml:"workflow"`
	Start         string   `toml:"start"`
	Branches      []Branch `toml:"branches"`
	MaxItems      *int     `toml:"max_items"`
	MaxConcurrent *int     `toml:"max_concurrent"`

	// fail, pause_for_approval
	Reason string `toml:"reason"`

	// respond
	Status       *int   `toml:"status"`
	ContentType  string `toml:"content_type"`
	BodyTemplate string `toml:"body_template"`

	// emit_event (extension): fires an internal.event trigger.
	Event       string `toml:"event"`
	PayloadFrom string `toml:"payload_from"`
}

// Edge is one [[edges]] entry.
type Edge struct {
	From          string `toml:"from"`
	To            string `toml:"to"`
	When          string `toml:"when"`
	MaxIterations *int   `toml:"max_iterations"` // set: a bounded loop edge
}

// Policy is the [policy] block. A nil family is denied when the block exists.
type Policy struct {
	FS    *FSPolicy    `toml:"fs"`
	Env   *EnvPolicy   `toml:"env"`
	HTTP  *HTTPPolicy  `toml:"http"`
	Shell *ShellPolicy `toml:"shell"`
	MCP   *MCPPolicy   `toml:"mcp"`
	Rego  *RegoPolicy  `toml:"rego"`
}

type FSPolicy struct {
	Read   []string `toml:"read"`
	Write  []string `toml:"write"`
	Delete []string `toml:"delete"`
	List   []string `toml:"list"`
}

type EnvPolicy struct {
	ReadKeys []string `toml:"read_keys"`
}

type HTTPPolicy struct {
	URLs    []string `toml:"urls"`
	Methods []string `toml:"methods"`
}

type ShellPolicy struct {
	Commands []string `toml:"commands"`
}

type MCPPolicy struct {
	Servers   []string `toml:"servers"`
	Tools     []string `toml:"tools"`
	Resources []string `toml:"resources"`
}

// RegoPolicy is [policy.rego]: a Rego policy every tool decision the
// static allowlists allow must also satisfy (the rego family; docs/policy.md).
// Data values are strings, merged at the root of the policy's data.
type RegoPolicy struct {
	File   string            `toml:"file"`
	Inline string            `toml:"inline"`
	Data   map[string]string `toml:"data"`
	Query  string            `toml:"query"`
}

// Auth holds the named route-auth bindings of [auth].
type Auth struct {
	Bearer map[string]BearerAuth `toml:"bearer"`
	Basic  map[string]BasicAuth  `toml:"basic"`
	HMAC   map[string]HMACAuth   `toml:"hmac"`
	OIDC   map[string]OIDCAuth   `toml:"oidc"`
}

type BearerAuth struct {
	TokensEnv    string   `toml:"tokens_env"`
	TokensSecret string   `toml:"tokens_secret"` // extension: a [[secrets]] name
	Tokens       []string `toml:"tokens"`        // tests only
}

type BasicAuth struct {
	CredentialsEnv    string   `toml:"credentials_env"`
	CredentialsSecret string   `toml:"credentials_secret"` // extension: a [[secrets]] name
	Credentials       []string `toml:"credentials"`        // tests only
}

type HMACAuth struct {
	SecretEnv       string  `toml:"secret_env"`
	SecretName      string  `toml:"secret_name"`      // extension: a [[secrets]] name
	Secret          string  `toml:"secret"`           // tests only
	Header          string  `toml:"header"`           // default X-Agent-Signature
	Prefix          *string `toml:"prefix"`           // default "sha256="
	TimestampHeader string  `toml:"timestamp_header"` // extension: replay protection
	ToleranceSecs   *int    `toml:"tolerance_secs"`   // default 300 when TimestampHeader is set
}

type OIDCAuth struct {
	Issuer           string   `toml:"issuer"`
	Audience         string   `toml:"audience"`
	JWKSFile         string   `toml:"jwks_file"`
	JWKSJSON         string   `toml:"jwks_json"`
	SubjectAllowlist []string `toml:"subject_allowlist"`
	ClockSkewSecs    *int     `toml:"clock_skew_secs"` // default 60
	Algorithms       []string `toml:"algorithms"`      // default ["RS256"]
}

// Server is the [server] block.
type Server struct {
	TLS *TLS `toml:"tls"`
	// OpsBind is the ops listener's address (/healthz, /readyz,
	// /metrics) when --ops-bind is not given; "" serves none.
	OpsBind string `toml:"ops_bind"`
}

type TLS struct {
	CertFile   string      `toml:"cert_file"`
	KeyFile    string      `toml:"key_file"`
	ClientAuth *ClientAuth `toml:"client_auth"`
}

type ClientAuth struct {
	Mode   string `toml:"mode"` // required
	CAFile string `toml:"ca_file"`
}

// Logging is the [logging] block.
type Logging struct {
	Level    string    `toml:"level"`
	Format   string    `toml:"format"` // text | json
	Target   string    `toml:"target"` // stderr | stdout | file:PATH
	Enabled  *bool     `toml:"enabled"`
	Rotation string    `toml:"rotation"`
	Audit    *AuditLog `toml:"audit"`
	OTel     *OTelLog  `toml:"otel"`
	// NodeEvents switches the per-attempt node.completed/node.failed
	// events (debug level); nil means on.
	NodeEvents *bool `toml:"node_events"`
}

type AuditLog struct {
	Target        string   `toml:"target"`
	RedactFields  []string `toml:"redact_fields"`
	IncludeReason *bool    `toml:"include_reason"`
}

type OTelLog struct {
	Endpoint      string            `toml:"endpoint"`
	ServiceName   string            `toml:"service_name"`
	Protocol      string            `toml:"protocol"`
	ResourceAttrs map[string]string `toml:"resource_attrs"`
	SampleRatio   *float64          `toml:"sample_ratio"`
}

// Signing is the [signing] block: a detached Ed25519 signature over the
// workflow file's exact bytes must verify before the file is used.
type Signing struct {
	Required      bool   `toml:"required"`
	PublicKeyFile string `toml:"public_key_file"`
	PublicKeyPEM  string `toml:"public_key_pem"`
	Algorithm     string `toml:"algorithm"` // ed25519
}

// Sandbox is the [sandbox] block: how the binary confines itself with
// Landlock at start-up (docs/sandbox.md).
type Sandbox struct {
	Landlock string `toml:"landlock"` // best_effort (default) | required | off
}

// Budget is the [budget] block; zero means unlimited.
type Budget struct {
	MaxMemoryMB    int64 `toml:"max_memory_mb"`
	MaxCPUSecs     int64 `toml:"max_cpu_secs"`
	MaxRunTimeSecs int64 `toml:"max_run_time_secs"`
	MaxFSWriteMB   int64 `toml:"max_fs_write_mb"`
	MaxLLMTokens   int64 `toml:"max_llm_tokens"`
}

// MCPServer is one [[mcp_servers]] entry.
type MCPServer struct {
	Name           string            `toml:"name"`
	Command        []string          `toml:"command"`
	URL            string            `toml:"url"` // extension: streamable HTTP
	AllowTools     []string          `toml:"allow_tools"`
	AllowResources []string          `toml:"allow_resources"`
	Env            map[string]string `toml:"env"` // VAR = SECRET_NAME
	// Headers go on every request to a url server: literals and
	// {{secret:NAME}} placeholders, resolved when a request is sent.
	Headers map[string]string `toml:"headers"`
	TLS     *MCPTLS           `toml:"tls"`  // url only: client certificate, trusted CAs
	Auth    *MCPAuth          `toml:"auth"` // url only: bearer token from a [[secrets]] oauth2 entry
}

// MCPAuth is a url server's token authentication.
type MCPAuth struct {
	Kind   string `toml:"kind"`   // oauth2
	Secret string `toml:"secret"` // a [[secrets]] entry of source oauth2
	// Hosts besides the server's own that protected-resource discovery
	// may reach (metadata, authorization server, token endpoint).
	Hosts []string `toml:"hosts"`
}

// MCPTLS is a url server's TLS client configuration (mTLS). Relative
// paths are tried against the workflow's directory first.
type MCPTLS struct {
	CertFile string `toml:"cert_file"` // PEM client certificate (chain)
	KeyFile  string `toml:"key_file"`  // PEM private key of cert_file
	CAFile   string `toml:"ca_file"`   // PEM CAs that replace the system roots
}

// Intelligence is the [intelligence] block.
type Intelligence struct {
	Backends []Backend `toml:"backends"`
}

// Backend is one named intelligence provider.
type Backend struct {
	Name      string `toml:"name"`
	Provider  string `toml:"provider"` // anthropic | openai | gemini | openai-compatible
	Model     string `toml:"model"`
	APIKeyEnv string `toml:"api_key_env"`
	BaseURL   string `toml:"base_url"`
	MaxTokens int    `toml:"max_tokens"`
}

// Secret is one [[secrets]] entry; Source selects which fields apply.
type Secret struct {
	Name   string `toml:"name"`
	Source string `toml:"source"` // env | file | command | oauth2

	Var  string   `toml:"var"`  // env
	Path string   `toml:"path"` // file
	Trim *bool    `toml:"trim"` // file; default true
	Argv []string `toml:"argv"` // command

	// oauth2 client credentials; the client secret itself comes from the
	// environment, never from the file.
	TokenURL        string            `toml:"token_url"`
	ClientIDEnv     string            `toml:"client_id_env"`
	ClientSecretEnv string            `toml:"client_secret_env"`
	Scopes          []string          `toml:"scopes"`
	ExtraParams     map[string]string `toml:"extra_params"`
	AuthStyle       string            `toml:"auth_style"` // body | basic
	SkewSecs        *int              `toml:"skew_secs"`
}

// Helpers for generated code: composite literals cannot take the address of
// a constant.

func Int(v int) *int             { return &v }
func Bool(v bool) *bool          { return &v }
func String(v string) *string    { return &v }
func Float64(v float64) *float64 { return &v }
