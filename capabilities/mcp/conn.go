package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/runtime"
)

// defaultPATH is the child's PATH when the process itself has none.
const defaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Timeouts of a connection's life cycle.
var (
	// StartTimeout bounds spawning or dialling a server plus the
	// initialize handshake.
	StartTimeout = 30 * time.Second
	// stopGrace is how long a stdio server gets to exit after its stdin
	// closes, and again after SIGTERM, before SIGKILL.
	stopGrace = 2 * time.Second
)

// quiet discards mcp-go's own logging: kiln reports through its audit log.
var quiet = slog.New(slog.DiscardHandler)

// httpTransport carries every url server's requests, sharing one
// connection pool as mcp-go's default client does. A server's url is
// configured, so its host is a named host to the SSRF guard: loopback and
// private servers work, a name resolving to a link-local or metadata
// address is refused at the dial, and a redirect to another host gets the
// public reach. No proxy from the environment.
var httpTransport http.RoundTripper = netguard.NewTransport()

// conn is one live connection to a server.
type conn struct {
	server string
	client *client.Client
	caps   mcp.ServerCapabilities

	// done is closed when the connection is gone: the stdio process
	// exited, or a transport failure marked it dead.
	done     chan struct{}
	doneOnce sync.Once
	// healthy is set once the server answered a request after start:
	// a restarted server that dies before that is not restarted again.
	healthy   atomic.Bool
	restarted bool

	// url only: a transport of this connection's own (tls), whose idle
	// connections close with it
	ownTransport interface{ CloseIdleConnections() }

	// stdio only
	cmd     *exec.Cmd
	stdout  *os.File // read end of the child's stdout, closed on close
	stderr  *tail
	exited  chan struct{} // closed after cmd.Wait returned
	waitErr error

	closeOnce sync.Once
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *conn) markDead() { c.doneOnce.Do(func() { close(c.done) }) }

// exitReason describes how a dead stdio server ended, with the last line
// of its stderr (secrets redacted).
func (c *conn) exitReason() string {
	if c.cmd == nil {
		return "connection lost"
	}
	select {
	case <-c.exited:
	default:
		return "connection lost"
	}
	msg := "exited"
	if c.waitErr != nil {
		msg = c.waitErr.Error()
	}
	if last := c.stderr.lastLine(); last != "" {
		msg += "; stderr: " + last
	}
	return msg
}

// close shuts the connection down: stdin closed (a stdio server exits on
// EOF), then SIGTERM, then SIGKILL to its process group.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.markDead()
		if c.client != nil {
			_ = c.client.Close()
		}
		if c.ownTransport != nil {
			c.ownTransport.CloseIdleConnections()
		}
		if c.cmd == nil {
			return
		}
		pgid := -c.cmd.Process.Pid
		if !waitClosed(c.exited, stopGrace) {
			_ = syscall.Kill(pgid, syscall.SIGTERM)
			if !waitClosed(c.exited, stopGrace) {
				_ = syscall.Kill(pgid, syscall.SIGKILL)
				<-c.exited
			}
		}
		// Helpers the server forked share its group: they go with it.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		_ = c.stdout.Close()
	})
}

func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// dial starts a server and performs the initialize handshake. The
// connection lives until close, whatever ctx (which bounds only the start)
// does.
func (p *Pool) dial(ctx context.Context, s Server) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	var c *conn
	var err error
	if s.URL != "" {
		c, err = p.dialHTTP(s)
	} else {
		c, err = p.spawn(s)
	}
	if err != nil {
		return nil, err
	}
	c.client.OnNotification(func(n mcp.JSONRPCNotification) { p.dispatch(s.Name, n) })
	if err := c.client.Start(p.ctx); err != nil {
		c.close()
		return nil, fmt.Errorf("start: %v", err)
	}
	// Pinning the newest initialize-era version keeps mcp-go from probing
	// for the 2026-07-28 protocol (see dialHTTP for why kiln stays there).
	res, err := c.client.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		ClientInfo:      mcp.Implementation{Name: "kiln", Version: "1"},
	}})
	if err != nil {
		reason := err.Error()
		if errors.Is(err, transport.ErrAuthorizationRequired) {
			reason = "the server refused the credentials (HTTP 401 Unauthorized); check its headers or auth"
		}
		// A server that dies during the handshake says why on stderr.
		if c.cmd != nil && waitClosed(c.exited, 500*time.Millisecond) {
			reason = c.exitReason()
		}
		c.close()
		return nil, fmt.Errorf("initialize: %s", runtime.Redact(reason))
	}
	c.caps = res.Capabilities
	return c, nil
}

// spawn starts a stdio server. It owns the process (mcp-go's own stdio
// transport would hand the child the whole environment): the child gets
// only PATH and the declared env vars, its own process group, and pipes
// that kiln closes itself, so a response written just before the child
// exits is still read.
func (p *Pool) spawn(s Server) (*conn, error) {
	env, err := p.childEnv(s)
	if err != nil {
		return nil, err
	}
	path, err := lookCommand(s.Command[0], s.Dir)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(path, s.Command[1:]...)
	cmd.Args[0] = s.Command[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout = inR, outW
	c := &conn{server: s.Name, done: make(chan struct{}), cmd: cmd, stdout: outR,
		stderr: &tail{}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A forked helper holding stderr open must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %v", s.Command[0], err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
		c.markDead()
	}()
	// Legacy protocol, as for HTTP (see dialHTTP): resources/subscribe is
	// what stdio servers implement. dial pins it in the initialize request.
	c.client = client.NewClient(transport.NewIO(outR, inW, nil))
	p.auditInfo("mcp.server.started", "server", s.Name, "transport", "stdio", "pid", cmd.Process.Pid)
	return c, nil
}

// dialHTTP connects to a streamable HTTP server.
//
// The connection is pinned to the legacy protocol (initialize handshake,
// 2025-11-25: dial asks for it, and continuous listening rules the modern
// one out in mcp-go) with the standalone GET stream open. Under the modern
// protocol (2026-07-28) servers drop sessions and answer the GET stream
// with 405, so notifications only flow through subscriptions/listen, which
// is new in mcp-go v1.2.1, unreliable in its HTTP transport and not spoken
// by the reference server. Live triggers would then miss updates; legacy
// resources/subscribe plus the GET stream is what every server speaks.
func (p *Pool) dialHTTP(s Server) (*conn, error) {
	base, err := serverTransport(s)
	if err != nil {
		return nil, err
	}
	tr, err := transport.NewStreamableHTTP(s.URL,
		//lint:ignore SA1019 the standalone GET stream is how legacy-protocol servers deliver notifications (see above)
		transport.WithContinuousListening(),
		transport.WithHTTPLogger(quiet),
		transport.WithHTTPBasicClient(&http.Client{Transport: p.credentials(s, base)}),
	)
	if err != nil {
		return nil, fmt.Errorf("url %s: %v", s.URL, err)
	}
	c := &conn{server: s.Name, done: make(chan struct{})}
	if base != httpTransport {
		c.ownTransport, _ = base.(interface{ CloseIdleConnections() })
	}
	c.client = client.NewClient(tr)
	p.auditInfo("mcp.server.started", "server", s.Name, "transport", "http", "url", s.URL)
	return c, nil
}

// childEnv is a stdio server's whole environment: PATH (the process's
// own, so a bare command name resolves the same way for the server's
// helpers) plus each declared VAR set to its secret's value.
func (p *Pool) childEnv(s Server) ([]string, error) {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPATH
	}
	var env []string
	if _, set := s.Env["PATH"]; !set {
		env = append(env, "PATH="+path)
	}
	for _, k := range runtime.SortedKeys(s.Env) {
		v, err := p.secret(s.Env[k])
		if err != nil {
			return nil, fmt.Errorf("env %s: secret %s: %v", k, s.Env[k], err)
		}
		runtime.RedactValue(v)
		env = append(env, k+"="+v)
	}
	return env, nil
}

// lookCommand resolves command[0]: a relative path is tried against the
// workflow's directory first, then the working directory; a bare name is
// looked up on PATH.
func lookCommand(name, dir string) (string, error) {
	if strings.Contains(name, "/") && !filepath.IsAbs(name) && dir != "" {
		if cand := filepath.Join(dir, name); isExecutable(cand) {
			return cand, nil
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("command %s: %v", name, errors.Unwrap(err))
	}
	return path, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// tail keeps the last few KiB a server wrote to stderr, for error
// messages; the rest is dropped so a chatty server cannot grow memory.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 4 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty stderr line, redacted and shortened.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	return runtime.Redact(last)
}

var _ io.Writer = (*tail)(nil)

// pings numbers keep-alive pings. String IDs never collide with the
// client's own numeric request IDs on the shared transport.
var pings atomic.Uint64

// ping sends the ping request of the initialize-era protocol every
// connection is pinned to (dial), through the transport. mcp-go's
// Client.Ping is deprecated: on a 2026-07-28 connection it succeeds
// without sending anything, so a keep-alive built on it would stop
// noticing lost sessions and hung servers without a word. Should a
// connection ever negotiate that protocol, ping fails loudly instead.
func (c *conn) ping(ctx context.Context) error {
	if v := c.client.ProtocolVersion(); mcp.IsModernProtocol(v) {
		return fmt.Errorf("protocol %s has no ping request; kiln's MCP connections use the initialize handshake", v)
	}
	resp, err := c.client.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(fmt.Sprintf("kiln-ping-%d", pings.Add(1))),
		Method:  string(mcp.MethodPing),
	})
	if err != nil {
		return transport.NewError(err) // Pool.lost: the connection is gone
	}
	if resp.Error != nil {
		return resp.Error.AsError()
	}
	return nil
}

// subscribe sends resources/subscribe, the initialize-era request every
// connection speaks (dial). mcp-go deprecates Client.Subscribe in favour
// of Client.Listen, which exists only on 2026-07-28 connections and which
// the reference server does not speak (see dialHTTP).
func (c *conn) subscribe(ctx context.Context, uri string) error {
	//lint:ignore SA1019 resources/subscribe is the legacy protocol's request; kiln pins that protocol
	return c.client.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}})
}
