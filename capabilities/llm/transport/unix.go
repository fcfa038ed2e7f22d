package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
)

// Unix calls a length-framed JSON-RPC server on a Unix socket, one
// connection per call.
type Unix struct {
	Path string
}

// Complete performs one `complete` call, bounded by ctx's deadline.
func (u *Unix) Complete(ctx context.Context, req *intel.Request) (*intel.Response, error) {
	id, body, err := encode(req)
	if err != nil {
		return nil, err
	}
	if len(body) > MaxFrame {
		return nil, fmt.Errorf("request of %d bytes exceeds the %d-byte frame cap", len(body), MaxFrame)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", u.Path)
	if err != nil {
		return nil, fault(ctx, "dial %s", u.Path, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// Cancellation without a deadline must also unblock the read.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	if err := WriteFrame(conn, body); err != nil {
		return nil, fault(ctx, "writing the request to %s", u.Path, err)
	}
	frame, err := ReadFrame(conn)
	if err != nil {
		return nil, fault(ctx, "reading the reply from %s", u.Path, err)
	}
	return decode(id, frame)
}

// fault wraps a connection error as a transport fault; when ctx has ended,
// its error is kept in the chain so callers can tell a deadline. The
// socket deadline is ctx's, and may fire a moment before ctx reports it.
func fault(ctx context.Context, what, target string, err error) error {
	cerr := ctx.Err()
	if _, hasDeadline := ctx.Deadline(); cerr == nil && hasDeadline && errors.Is(err, os.ErrDeadlineExceeded) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("transport fault: "+what+": %v: %w", target, err, cerr)
	}
	return fmt.Errorf("transport fault: "+what+": %w", target, err)
}
