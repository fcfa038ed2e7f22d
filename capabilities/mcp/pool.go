package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
)

// ErrClosed is returned by a pool after Close.
var ErrClosed = errors.New("mcp: the client pool is shut down")

// Pool is the process's MCP client: one shared connection per server,
// started on first use, restarted once when it dies, closed by Close. It
// implements mcpclient.Client and re-checks each server's own allowlist
// before every request (the node handlers check it too, with the policy).
type Pool struct {
	servers map[string]Server
	secret  func(name string) (string, error)
	refused func(name, value string)
	opts    Options
	audit   *slog.Logger

	// ctx is the lifetime of the connections (HTTP listen streams, the
	// handling of server requests); cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	states map[string]*state
	closed bool
}

// state is one server's connection and what outlives a restart.
type state struct {
	// sem serialises starts: concurrent first users wait for one start.
	sem    chan struct{}
	cur    *conn
	failed error // set when a restart failed: the server stays down
	// subs are the resources/subscribe URIs, renewed after a restart.
	subs     map[string]bool
	watchers map[*watcher]bool
}

type watcher struct{ ch chan Notice }

// Notice is what a watcher of a server receives.
type Notice struct {
	// Method is the notification ("notifications/resources/updated",
	// "notifications/resources/list_changed", ...); "" for the events below.
	Method string
	URI    string // the notification's params.uri, if any
	// Reconnected: the server was restarted and its subscriptions renewed;
	// resources may have changed meanwhile.
	Reconnected bool
	// Err: the server is down for good; nothing follows.
	Err error
}

// Options configure a pool.
type Options struct {
	// Secret resolves the secret names of a server's env (required when a
	// server declares env).
	Secret func(name string) (string, error)
	// Refused reports an oauth2 token a server answered 401 to, so the
	// next Secret fetches a new one (nil: nothing to tell).
	Refused func(name, value string)
	// Retarget points an oauth2 secret at the token endpoint that
	// protected-resource discovery found and checked (nil: discovery is
	// off).
	Retarget func(name, tokenURL string) error
	// Policy checks every URL discovery reaches as an http request (nil:
	// only the hosts are checked).
	Policy *policy.Policy
	// Audit receives mcp.server.* events; nil discards them.
	Audit *slog.Logger
	// Restarted is told each time a server that died is started again;
	// Down when a server is down for good (nil: nothing to tell). The
	// metrics and /readyz use them.
	Restarted func(server string)
	Down      func(server string, err error)
}

// NewPool builds a pool for servers. Nothing starts until first use.
func NewPool(servers []Server, o Options) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{servers: map[string]Server{}, secret: o.Secret, refused: o.Refused, opts: o, audit: o.Audit, ctx: ctx, cancel: cancel,
		states: map[string]*state{}}
	if p.secret == nil {
		p.secret = func(name string) (string, error) { return "", errors.New("no secrets registry is configured") }
	}
	if p.refused == nil {
		p.refused = func(string, string) {}
	}
	for _, s := range servers {
		p.servers[s.Name] = s
		p.states[s.Name] = &state{sem: make(chan struct{}, 1), subs: map[string]bool{}, watchers: map[*watcher]bool{}}
	}
	return p
}

// Names lists the pool's servers.
func (p *Pool) Names() []string { return runtime.SortedKeys(p.servers) }

// Server returns a server's configuration; "" picks the only server, else
// "default".
func (p *Pool) Server(name string) (Server, error) {
	if name == "" {
		if len(p.servers) == 1 {
			for _, s := range p.servers {
				return s, nil
			}
		}
		name = DefaultServer
	}
	s, ok := p.servers[name]
	if !ok {
		hint := "declare it in [[mcp_servers]]"
		if name == DefaultServer {
			hint = "pass --mcp-stdio \"CMD ARGS\" (or KILN_MCP_STDIO) or declare [[mcp_servers]]"
		}
		return Server{}, fmt.Errorf("MCP server %q is not configured: %s", name, hint)
	}
	return s, nil
}

// CallTool calls tools/call and returns the result object. The call is
// never replayed on a server that died while it ran.
func (p *Pool) CallTool(ctx context.Context, server, tool string, args map[string]any) (map[string]any, error) {
	s, err := p.Server(server)
	if err != nil {
		return nil, err
	}
	if err := s.ToolAllowed(tool); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	var res *mcp.CallToolResult
	err = p.do(ctx, s.Name, "tools/call "+tool, false, func(ctx context.Context, c *conn) (err error) {
		res, err = c.client.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
		return err
	})
	if err != nil {
		return nil, err
	}
	return toObject(res)
}

// ReadResource calls resources/read and returns the result object.
func (p *Pool) ReadResource(ctx context.Context, server, uri string) (map[string]any, error) {
	s, err := p.Server(server)
	if err != nil {
		return nil, err
	}
	if err := s.ResourceAllowed(uri); err != nil {
		return nil, err
	}
	var res *mcp.ReadResourceResult
	err = p.do(ctx, s.Name, "resources/read", true, func(ctx context.Context, c *conn) (err error) {
		res, err = c.client.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		return err
	})
	if err != nil {
		return nil, err
	}
	return toObject(res)
}

// ListResources returns the URIs of resources/list (all pages), sorted.
func (p *Pool) ListResources(ctx context.Context, server string) ([]string, error) {
	var uris []string
	err := p.do(ctx, server, "resources/list", true, func(ctx context.Context, c *conn) error {
		res, err := c.client.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			return err
		}
		uris = uris[:0]
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		return nil
	})
	sort.Strings(uris)
	return uris, err
}

// Subscribe sends resources/subscribe for uri (allowlist checked) and
// renews it whenever the server is restarted.
func (p *Pool) Subscribe(ctx context.Context, server, uri string) error {
	s, err := p.Server(server)
	if err != nil {
		return err
	}
	if err := s.ResourceAllowed(uri); err != nil {
		return err
	}
	st := p.states[s.Name]
	p.mu.Lock()
	st.subs[uri] = true
	p.mu.Unlock()
	err = p.do(ctx, s.Name, "resources/subscribe", true, func(ctx context.Context, c *conn) error {
		return c.subscribe(ctx, uri)
	})
	if err != nil {
		p.mu.Lock()
		delete(st.subs, uri)
		p.mu.Unlock()
	}
	return err
}

// Capabilities starts the server if needed and returns what it declared.
func (p *Pool) Capabilities(ctx context.Context, server string) (mcp.ServerCapabilities, error) {
	c, err := p.get(ctx, server)
	if err != nil {
		return mcp.ServerCapabilities{}, err
	}
	return c.caps, nil
}

// Ping checks that the server answers; a lost connection is restarted.
func (p *Pool) Ping(ctx context.Context, server string) error {
	return p.do(ctx, server, "ping", true, func(ctx context.Context, c *conn) error { return c.ping(ctx) })
}

// Start starts a server now instead of on first use.
func (p *Pool) Start(ctx context.Context, server string) error {
	_, err := p.get(ctx, server)
	return err
}

// Watch delivers the server's notifications (and restarts and failure)
// until stop is called. A watched server that dies is restarted at once,
// not on next use, so its subscriptions keep flowing.
func (p *Pool) Watch(server string) (notices <-chan Notice, stop func(), err error) {
	s, err := p.Server(server)
	if err != nil {
		return nil, nil, err
	}
	w := &watcher{ch: make(chan Notice, 256)}
	st := p.states[s.Name]
	p.mu.Lock()
	st.watchers[w] = true
	p.mu.Unlock()
	return w.ch, func() {
		p.mu.Lock()
		delete(st.watchers, w)
		p.mu.Unlock()
	}, nil
}

// PID returns the process id of a running stdio server (0 if none); for
// tests and diagnostics.
func (p *Pool) PID(server string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.states[server]
	if !ok || st.cur == nil || st.cur.cmd == nil || !st.cur.alive() {
		return 0
	}
	return st.cur.cmd.Process.Pid
}

// Close shuts every server down (stdin closed, then SIGTERM, then
// SIGKILL) and makes every later call fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var conns []*conn
	for _, st := range p.states {
		if st.cur != nil {
			conns = append(conns, st.cur)
		}
		for w := range st.watchers {
			select {
			case w.ch <- Notice{Err: ErrClosed}:
			default:
			}
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close()
			p.auditInfo("mcp.server.stopped", "server", c.server)
		}()
	}
	wg.Wait()
	p.cancel()
	return nil
}

// do runs one request on server's connection. A request that loses the
// connection is sent again on the restarted server when that is safe:
// when it is idempotent (reads, lists, subscribe, ping) or certainly never
// reached the server. A tool call that was in flight is not replayed,
// because it may already have had its effect.
func (p *Pool) do(ctx context.Context, server, what string, idempotent bool, f func(context.Context, *conn) error) error {
	s, err := p.Server(server)
	if err != nil {
		return err
	}
	c, err := p.get(ctx, s.Name)
	if err != nil {
		return err
	}
	err = f(ctx, c)
	if !p.lost(ctx, c, err) {
		return err
	}
	if !idempotent && !notDelivered(err) {
		return fmt.Errorf("server %s: connection lost during %s (%s); not replayed, as it may have taken effect; the server restarts on next use: %w",
			s.Name, what, c.exitReason(), err)
	}
	c, gerr := p.get(ctx, s.Name)
	if gerr != nil {
		return fmt.Errorf("%s: %w", what, gerr)
	}
	err = f(ctx, c)
	p.lost(ctx, c, err)
	return err
}

// lost records what a request's outcome says about its connection: an
// answer (even a JSON-RPC error) proves the server healthy, a transport
// failure marks the connection dead. It reports the latter.
func (p *Pool) lost(ctx context.Context, c *conn, err error) bool {
	var te *transport.Error
	switch {
	case err == nil:
		c.healthy.Store(true)
		return false
	case ctx.Err() != nil:
		return false // the caller gave up; the server may be fine
	case !errors.As(err, &te) && !errors.Is(err, transport.ErrTransportClosed):
		c.healthy.Store(true)
		return false
	}
	c.markDead()
	return true
}

// notDelivered reports transport errors that prove the request never
// reached a server: a refused connection or a session the server forgot.
func notDelivered(err error) bool {
	var op *net.OpError
	return errors.Is(err, transport.ErrSessionTerminated) || errors.Is(err, syscall.ECONNREFUSED) ||
		(errors.As(err, &op) && op.Op == "dial")
}

// get returns server's live connection, starting it (first use) or
// restarting it (it died) as needed. A server is restarted once per death:
// a restarted server that dies again before answering anything, or whose
// restart fails, stays down and every later call fails with that reason.
func (p *Pool) get(ctx context.Context, server string) (*conn, error) {
	s, err := p.Server(server)
	if err != nil {
		return nil, err
	}
	st := p.states[s.Name]
	select {
	case st.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-st.sem }()

	p.mu.Lock()
	cur, failed, closed := st.cur, st.failed, p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return nil, ErrClosed
	case failed != nil:
		return nil, failed
	case cur != nil && cur.alive():
		return cur, nil
	}
	restart := cur != nil
	if restart {
		reason := cur.exitReason()
		cur.close()
		if cur.restarted && !cur.healthy.Load() {
			return nil, p.fail(s.Name, st, fmt.Errorf("MCP server %s died again before answering after its restart (%s); it is not restarted again", s.Name, reason))
		}
		p.auditWarn("mcp.server.exited", "server", s.Name, "reason", reason, "action", "restart")
		if p.opts.Restarted != nil {
			p.opts.Restarted(s.Name)
		}
	}
	c, err := p.dial(ctx, s)
	if err != nil {
		err = fmt.Errorf("MCP server %s: %w", s.Name, err)
		if restart && ctx.Err() == nil {
			return nil, p.fail(s.Name, st, fmt.Errorf("restart failed: %w", err))
		}
		p.auditWarn("mcp.server.error", "server", s.Name, "error", err.Error())
		return nil, err
	}
	c.restarted = restart
	p.mu.Lock()
	subs := runtime.SortedKeys(st.subs)
	p.mu.Unlock()
	for _, uri := range subs {
		err := c.subscribe(ctx, uri)
		if err != nil {
			p.auditWarn("mcp.server.error", "server", s.Name, "uri", uri, "error", "renewing subscription: "+runtime.Redact(err.Error()))
			continue
		}
		c.healthy.Store(true)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return nil, ErrClosed
	}
	st.cur = c
	if restart {
		p.notifyLocked(st, Notice{Reconnected: true})
	}
	p.mu.Unlock()
	go p.monitor(s.Name, st, c)
	return c, nil
}

// fail marks a server down for good and tells its watchers.
func (p *Pool) fail(server string, st *state, err error) error {
	p.mu.Lock()
	st.failed = err
	st.cur = nil
	p.notifyLocked(st, Notice{Err: err})
	p.mu.Unlock()
	p.auditWarn("mcp.server.failed", "error", err.Error())
	if p.opts.Down != nil {
		p.opts.Down(server, err)
	}
	return err
}

// Up reports, per server, whether its connection is alive now (a server
// not started yet, died or down for good is not).
func (p *Pool) Up() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	up := make(map[string]bool, len(p.states))
	for name, st := range p.states {
		up[name] = st.cur != nil && st.cur.alive()
	}
	return up
}

// monitor restarts a watched server as soon as its connection dies; an
// unwatched one restarts on next use.
func (p *Pool) monitor(server string, st *state, c *conn) {
	select {
	case <-c.done:
	case <-p.ctx.Done():
		return
	}
	p.mu.Lock()
	watched := len(st.watchers) > 0 && !p.closed && st.cur == c
	p.mu.Unlock()
	if watched {
		_, _ = p.get(p.ctx, server) // failures reach the watchers
	}
}

// dispatch fans a server notification out to its watchers. It runs on the
// transport's reader, so it never blocks: a watcher that is 256 notices
// behind loses the newest one, and that is audited.
func (p *Pool) dispatch(server string, n mcp.JSONRPCNotification) {
	uri, _ := n.Params.AdditionalFields["uri"].(string)
	p.mu.Lock()
	st := p.states[server]
	dropped := 0
	if st != nil {
		dropped = p.notifyLocked(st, Notice{Method: n.Method, URI: uri})
	}
	p.mu.Unlock()
	if dropped > 0 {
		p.auditWarn("mcp.notification.dropped", "server", server, "method", n.Method, "uri", uri, "watchers", dropped)
	}
}

func (p *Pool) notifyLocked(st *state, n Notice) (dropped int) {
	for w := range st.watchers {
		select {
		case w.ch <- n:
		default:
			dropped++
		}
	}
	return dropped
}

func (p *Pool) auditInfo(msg string, attrs ...any) {
	if p.audit != nil {
		p.audit.Info(msg, attrs...)
	}
}

func (p *Pool) auditWarn(msg string, attrs ...any) {
	if p.audit != nil {
		p.audit.Warn(msg, attrs...)
	}
}

// toObject turns a typed mcp-go result back into the JSON object the
// server sent (numbers as json.Number, like every kiln value).
func toObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d, err := runtime.DecodeJSON(b)
	if err != nil {
		return nil, err
	}
	obj, ok := d.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("result is %s, not an object", runtime.TypeName(d))
	}
	return obj, nil
}

var _ mcpclient.Client = (*Pool)(nil)

// errText is an error's message with registered secrets removed.
func errText(err error) string { return runtime.Redact(strings.TrimSpace(err.Error())) }
