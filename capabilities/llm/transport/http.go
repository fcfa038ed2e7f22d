package transport

import (
	"context"
	"fmt"
	"net/http"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/internal/post"
)

// HTTP POSTs the JSON-RPC envelope, unframed, to URL.
type HTTP struct {
	URL string
	// Bearer, when set, is sent as "Authorization: Bearer <token>".
	Bearer string
}

// Complete performs one `complete` call, bounded by ctx's deadline.
func (h *HTTP) Complete(ctx context.Context, req *intel.Request) (*intel.Response, error) {
	id, body, err := encode(req)
	if err != nil {
		return nil, err
	}
	if len(body) > MaxFrame {
		return nil, fmt.Errorf("request of %d bytes exceeds the %d-byte cap", len(body), MaxFrame)
	}
	header := http.Header{}
	if h.Bearer != "" {
		header.Set("Authorization", "Bearer "+h.Bearer)
	}
	data, err := post.JSON(ctx, h.URL, header, body, h.Bearer)
	if err != nil {
		if _, ok := err.(*post.StatusError); ok {
			return nil, fmt.Errorf("transport fault: %w", err)
		}
		return nil, err
	}
	return decode(id, data)
}
