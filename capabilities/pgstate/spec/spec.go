// Package spec declares the pgstate family's [state] block: the shared
// PostgreSQL state backend of a fleet of replicas (see docs/scaling.md).
// It holds data and checks only, so the generator links it without pgx.
package spec

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The values of [state] backend.
const (
	File     = "file"
	Postgres = "postgres"
)

// Defaults and bounds of the [state] numbers.
const (
	DefaultMaxConns         = 10
	MaxMaxConns             = 100
	DefaultQueryTimeoutSecs = 5
	MaxQueryTimeoutSecs     = 60
	DefaultLeaseSecs        = 30
	MinLeaseSecs            = 3
	MaxLeaseSecs            = 600
)

// Keys are the [state] keys.
var Keys = []spec.Key{
	{Name: "backend", Type: spec.String, Default: File,
		Doc: "file (state under --state-dir, one host) or postgres (shared by every replica on one database)"},
	{Name: "host", Type: spec.String,
		Doc: "postgres: the database's host[:port] (default port 5432), a network need, or an absolute Unix socket directory; the connection string must name the same"},
	{Name: "dsn_secret", Type: spec.String, Doc: "postgres: the [[secrets]] entry holding the connection string (its password a secret need)"},
	{Name: "dsn_env", Type: spec.String, Doc: "postgres: the environment variable holding the connection string, instead of dsn_secret"},
	{Name: "max_conns", Type: spec.Int, Default: "10", Doc: "postgres: connection pool size, 1 to 100"},
	{Name: "min_conns", Type: spec.Int, Default: "0", Doc: "postgres: connections kept open, at most max_conns"},
	{Name: "query_timeout_secs", Type: spec.Int, Default: "5", Doc: "postgres: bound on every statement, 1 to 60"},
	{Name: "lease_secs", Type: spec.Int, Default: "30", Doc: "postgres: how long a claim outlives its replica's last renewal (renewed every third of it), 3 to 600"},
}

// Family is the pgstate family's declaration.
var Family = spec.Family{
	ID:       "pgstate",
	Check:    CheckState,
	Needs:    needs,
	NeedsDoc: "the database host of [state] (class family:pgstate; none for a Unix socket directory) and its dsn_secret or dsn_env (a secret need: the connection string holds the password)",
}

// Shared reports whether wf keeps its state in PostgreSQL.
func Shared(wf *workflow.Workflow) bool {
	return wf != nil && wf.State != nil && wf.State.Backend == Postgres
}

// HostPort splits [state] host into host and port (5432 by default); a
// Unix socket directory is returned whole.
func HostPort(h string) (host string, port uint16, ok bool) {
	if strings.HasPrefix(h, "/") {
		return h, 5432, filepath.Clean(h) == h
	}
	host, p, err := net.SplitHostPort(h)
	if err != nil {
		host, p = h, "5432"
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || host == "" || strings.ContainsAny(host, "/@?#:= \t") {
		return "", 0, false
	}
	return host, uint16(n), true
}

// CheckState checks the [state] block.
func CheckState(wf *workflow.Workflow, _ spec.Context) []spec.Issue {
	var is spec.Issues
	st := wf.State
	if st == nil {
		return nil
	}
	switch st.Backend {
	case "", File:
		if st.Host != "" || st.DSNSecret != "" || st.DSNEnv != "" || st.MaxConns != 0 || st.MinConns != 0 || st.QueryTimeoutSecs != 0 || st.LeaseSecs != 0 {
			is.Add("invalid_state", "[state]: host, dsn_secret, dsn_env, max_conns, min_conns, query_timeout_secs and lease_secs are for backend = \"postgres\"")
		}
		return is
	case Postgres:
	default:
		is.Add("invalid_state", "[state] backend: %q must be file or postgres", st.Backend)
		return is
	}
	if st.Host == "" {
		is.Add("missing_field", "[state] host is required with backend = \"postgres\" (the database's host[:port]: a network need)")
	} else if _, _, ok := HostPort(st.Host); !ok {
		is.Add("invalid_state", "[state] host: %q must be host[:port] or a clean absolute Unix socket directory", st.Host)
	}
	switch {
	case st.DSNSecret == "" && st.DSNEnv == "":
		is.Add("state_dsn_source", "[state]: set dsn_secret or dsn_env: the connection string comes from a secret or the environment, never from the workflow")
	case st.DSNSecret != "" && st.DSNEnv != "":
		is.Add("state_dsn_source", "[state]: set dsn_secret or dsn_env, not both")
	}
	is.SecretRef(wf, "[state] dsn_secret", st.DSNSecret)
	is.EnvKey("[state] dsn_env", st.DSNEnv)
	if st.MaxConns < 0 || st.MaxConns > MaxMaxConns {
		is.Add("out_of_range", "[state] max_conns must be 1 to %d, got %d", MaxMaxConns, st.MaxConns)
	}
	maxConns := st.MaxConns
	if maxConns == 0 {
		maxConns = DefaultMaxConns
	}
	if st.MinConns < 0 || st.MinConns > maxConns {
		is.Add("out_of_range", "[state] min_conns must be 0 to max_conns (%d), got %d", maxConns, st.MinConns)
	}
	if st.QueryTimeoutSecs < 0 || st.QueryTimeoutSecs > MaxQueryTimeoutSecs {
		is.Add("out_of_range", "[state] query_timeout_secs must be 1 to %d, got %d", MaxQueryTimeoutSecs, st.QueryTimeoutSecs)
	}
	if st.LeaseSecs != 0 && (st.LeaseSecs < MinLeaseSecs || st.LeaseSecs > MaxLeaseSecs) {
		is.Add("out_of_range", "[state] lease_secs must be %d to %d, got %d", MinLeaseSecs, MaxLeaseSecs, st.LeaseSecs)
	}
	return is
}

func needs(wf *workflow.Workflow) []spec.Need {
	if !Shared(wf) {
		return nil
	}
	var out []spec.Need
	if h, port, ok := HostPort(wf.State.Host); ok && !strings.HasPrefix(h, "/") {
		out = append(out, spec.Need{Class: "family:pgstate", Kind: spec.NeedNetwork,
			Host: strings.ToLower(h), Ungoverned: true, Label: fmt.Sprintf("[state] database (port %d)", port)})
	}
	// The connection string holds the password: its secret or its
	// variable is a secret need.
	for _, k := range []string{wf.State.DSNSecret, wf.State.DSNEnv} {
		if k != "" {
			out = append(out, spec.Need{Class: "family:pgstate", Kind: spec.NeedSecret, Key: k, Ungoverned: true, Label: "[state] connection string"})
		}
	}
	return out
}
