package mcp

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	"github.com/kilnworks/kiln/capabilities/secrets/tokenrefresh"
	"github.com/kilnworks/kiln/runtime"
)

// EnvStdio is read when --mcp-stdio is not given.
const EnvStdio = "KILN_MCP_STDIO"

var flags struct{ stdio string }

// pools are the pools Setup created; Close shuts them down.
var pools struct {
	sync.Mutex
	list []*Pool
}

func init() {
	runtime.RegisterExtension(runtime.Extension{
		Name: "mcp",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&flags.stdio, "mcp-stdio", "", "spawn this MCP server over stdio as server \"default\" (\"CMD ARGS\"; env "+EnvStdio+")")
		},
		Setup: func(ctx context.Context, h *runtime.Host) error {
			stdio := flags.stdio
			if stdio == "" {
				stdio = os.Getenv(EnvStdio)
			}
			return Setup(ctx, h, stdio)
		},
		Listeners: Listeners,
		Close:     closeAll,
	})
}

// Setup validates the program's MCP declarations and, unless something
// (the fixture runner's mock) already set one, makes a pool of its servers
// the host's MCP client (mcpclient.SetClient). stdio is the legacy
// --mcp-stdio command ("" = none). In serve mode every server starts now,
// so a broken one fails start-up instead of the first request.
func Setup(ctx context.Context, h *runtime.Host, stdio string) error {
	if err := validateTree(h.Program); err != nil {
		return err
	}
	if h.Engine.Services == nil {
		h.Engine.Services = &runtime.Services{}
	}
	svc := h.Engine.Services
	if mcpclient.ClientFrom(svc) != nil {
		return nil
	}
	declared := map[string]Server{}
	if err := collectServers(h.Program, declared); err != nil {
		return err
	}
	if stdio != "" {
		argv, err := splitCommand(stdio)
		if err != nil {
			return fmt.Errorf("--mcp-stdio: %v", err)
		}
		if _, clash := declared[DefaultServer]; clash {
			return fmt.Errorf("--mcp-stdio: [[mcp_servers]] already declares a server named %q", DefaultServer)
		}
		declared[DefaultServer] = Server{Name: DefaultServer, Command: argv, Legacy: true}
	}
	if len(declared) == 0 {
		return nil
	}
	servers := make([]Server, 0, len(declared))
	for _, name := range runtime.SortedKeys(declared) {
		servers = append(servers, declared[name])
	}
	// The secrets family may fill Services.Secret after this Setup, so it
	// is looked up when a server starts.
	pool := NewPool(servers, Options{Secret: svc.SecretValue, Audit: h.Engine.Audit,
		Refused:  func(name, value string) { tokenrefresh.Refused(svc, name, value) },
		Retarget: func(name, tokenURL string) error { return tokenrefresh.Retarget(svc, name, tokenURL) },
		Policy:   h.Program.Policy,
		// Looked up when it happens: the metrics are attached later, by
		// the serve loop's listeners.
		Restarted: func(server string) { metrics.OfEngine(h.Engine).MCPRestarted(server) },
		Down: func(server string, err error) {
			h.BlockReady("mcp server "+server, "down for good: "+runtime.Redact(err.Error()))
		}})
	pools.Lock()
	pools.list = append(pools.list, pool)
	pools.Unlock()
	mcpclient.SetClient(svc, pool)
	if h.ServeMode {
		for _, name := range pool.Names() {
			if err := pool.Start(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

func closeAll() error {
	pools.Lock()
	list := pools.list
	pools.list = nil
	pools.Unlock()
	for _, p := range list {
		_ = p.Close()
	}
	return nil
}
