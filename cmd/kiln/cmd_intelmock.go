package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "intel-mock",
		summary: "serve a scripted intelligence backend (Unix socket or HTTP) so LLM workflows run without an account",
		run: func(args []string, stdout, stderr io.Writer) int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runIntelMock(ctx, args, stdout, stderr)
		},
	})
}

// runIntelMock serves until ctx ends (SIGINT/SIGTERM) and exits 0; bad
// flags, an unreadable script or an unusable address exit 2. Once
// listening it prints the address to pass to `kiln run` on stdout:
// "--intel-unix PATH" or "--intel-http URL".
func runIntelMock(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln intel-mock", flag.ContinueOnError)
	fl.SetOutput(stderr)
	socket := fl.String("socket", "", "serve length-framed JSON-RPC on this Unix socket")
	addr := fl.String("http", "", "serve the JSON-RPC envelope over HTTP on this address (host:port; port 0 picks one)")
	scriptPath := fl.String("script", "", "turns file (TOML): [[turns]] content, prompt_tokens, completion_tokens, delay_ms, expect (texts the call must contain); fail_on_call = N")
	quiet := fl.Bool("quiet", false, "do not log each call on stderr")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln intel-mock (--socket PATH | --http ADDR) --script turns.toml [--quiet]")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if fl.NArg() != 0 || *scriptPath == "" || (*socket == "") == (*addr == "") {
		fl.Usage()
		return cli.ExitUsage
	}
	script, err := mock.LoadScript(*scriptPath)
	if err != nil {
		fmt.Fprintf(stderr, "kiln intel-mock: %v\n", err)
		return cli.ExitUsage
	}
	srv := mock.New(script)
	if !*quiet {
		srv.Log = stderr
	}

	if *socket != "" {
		ln, err := listenUnix(*socket)
		if err != nil {
			fmt.Fprintf(stderr, "kiln intel-mock: %v\n", err)
			return cli.ExitUsage
		}
		defer os.Remove(*socket)
		fmt.Fprintf(stderr, "kiln intel-mock: %d turn(s) on unix socket %s\n", len(script.Turns), *socket)
		fmt.Fprintf(stdout, "--intel-unix %s\n", *socket)
		if err := srv.ServeUnix(ctx, ln); err != nil {
			fmt.Fprintf(stderr, "kiln intel-mock: %v\n", err)
			return cli.ExitFailed
		}
		return cli.ExitOK
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "kiln intel-mock: %v\n", err)
		return cli.ExitUsage
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "kiln intel-mock: %d turn(s) on http://%s/\n", len(script.Turns), ln.Addr())
	fmt.Fprintf(stdout, "--intel-http http://%s/\n", ln.Addr())
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return cli.ExitOK
	case err := <-errc:
		fmt.Fprintf(stderr, "kiln intel-mock: %v\n", err)
		return cli.ExitFailed
	}
}

// listenUnix listens on path, replacing a stale socket file left by a
// crashed server but never a live socket or any other file. The socket is
// private to the user.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by another server", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
