package workflow

// State is the [state] block: where the binary keeps the state it shares
// (idempotency claims and replies). Without it, or with backend = "file",
// state lives under --state-dir on one host; "postgres" shares it with
// every replica using the same database (docs/scaling.md).
type State struct {
	Backend string `toml:"backend"` // file (default) | postgres
	// Host is the database's host[:port] (a network need) or a Unix
	// socket directory; the connection string must name the same.
	Host string `toml:"host"`
	// The connection string comes from a [[secrets]] entry or an
	// environment variable, never from the workflow: exactly one is set.
	DSNSecret        string `toml:"dsn_secret"`
	DSNEnv           string `toml:"dsn_env"`
	MaxConns         int    `toml:"max_conns"`
	MinConns         int    `toml:"min_conns"`
	QueryTimeoutSecs int    `toml:"query_timeout_secs"`
	LeaseSecs        int    `toml:"lease_secs"`
}
