// Package intel holds the intelligence client types of the llm family and
// where a run finds its client: the llm nodes, the backend transports and
// providers, and the fixture runner's mock all use it without linking the
// family itself.
package intel

import (
	"context"

	"github.com/kilnworks/kiln/runtime"
)

// Client performs one completion.
type Client interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is the `complete` call's params.
type Request struct {
	Model     string    `json:"model"`
	Messages  []Message `json:"messages"`
	MaxTokens int       `json:"max_tokens"`
}

// Usage is the token cost of one completion.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// Response is the `complete` call's result.
type Response struct {
	Content string `json:"content"`
	Usage   Usage  `json:"usage"`
}

// Backends returns the client of a named backend ("default" is the
// --intel-unix / --intel-http transport).
type Backends func(backend string) (Client, error)

type key struct{}

// SetClient makes b the intelligence backends of svc's runs.
func SetClient(svc *runtime.Services, b Backends) { svc.Values.Store(key{}, b) }

// ClientFrom returns the backends SetClient gave svc; nil when none were
// given.
func ClientFrom(svc *runtime.Services) Backends {
	if svc == nil {
		return nil
	}
	b, _ := svc.Values.Load(key{})
	f, _ := b.(Backends)
	return f
}
