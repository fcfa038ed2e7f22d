// Package provider implements the named remote intelligence backends of
// [[intelligence.backends]] over net/http: Anthropic messages, OpenAI chat
// completions (and OpenAI-compatible servers via base_url) and Gemini
// generateContent. Each honours the backend's model and max_tokens (the
// reference runtime ignored them) and reads its API key at request time.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/internal/post"
	llmspec "github.com/kilnworks/kiln/capabilities/llm/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Public API endpoints used when a backend sets no base_url.
const (
	AnthropicBaseURL = "https://api.anthropic.com"
	OpenAIBaseURL    = "https://api.openai.com"
	GeminiBaseURL    = "https://generativelanguage.googleapis.com"
	// AnthropicVersion is the API version header the messages call sends.
	AnthropicVersion = "2023-06-01"
)

// BaseURL is where b's requests go: its base_url, else its provider's
// public endpoint ("" when there is none: openai-compatible needs one).
func BaseURL(b workflow.Backend) string {
	if b.BaseURL != "" {
		return b.BaseURL
	}
	switch b.Provider {
	case "anthropic":
		return AnthropicBaseURL
	case "openai":
		return OpenAIBaseURL
	case "gemini":
		return GeminiBaseURL
	}
	return ""
}

// SecretFunc returns a secret's value by name (the [[secrets]] registry).
type SecretFunc func(name string) (string, error)

// New builds the client of one backend. secret may be nil (environment
// only). Structural mistakes (unknown provider, missing model, bad
// base_url) are errors here, so they surface before any run.
func New(b workflow.Backend, secret SecretFunc) (intel.Client, error) {
	if err := spec.Err(llmspec.CheckBackend(b)); err != nil {
		return nil, fmt.Errorf("backend %q (%s): %w", b.Name, b.Provider, err)
	}
	base := BaseURL(b)
	switch b.Provider {
	case "anthropic", "openai", "gemini":
	case "openai-compatible":
		if base == "" {
			return nil, fmt.Errorf("backend %q (openai-compatible): base_url is required", b.Name)
		}
	default:
		return nil, fmt.Errorf("backend %q: unknown provider %q (want anthropic, openai, openai-compatible or gemini)", b.Name, b.Provider)
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("backend %q (%s): base_url %q is not an http(s) URL", b.Name, b.Provider, base)
	}
	c := &client{b: b, base: strings.TrimRight(base, "/"), secret: secret}
	switch b.Provider {
	case "anthropic":
		return &anthropic{c}, nil
	case "gemini":
		return &gemini{c}, nil
	}
	return &openai{c}, nil
}

type client struct {
	b      workflow.Backend
	base   string
	secret SecretFunc
}

// key resolves the API key at request time: the secrets registry first,
// then the environment variable of that name. The value is registered for
// redaction and never appears in an error.
func (c *client) key() (string, error) {
	name := c.b.APIKeyEnv
	if name == "" {
		if c.b.Provider == "openai-compatible" {
			return "", nil // local servers commonly need no key
		}
		return "", runtime.Errorf(runtime.ClassConfig, "backend %q (%s): api_key_env is not set", c.b.Name, c.b.Provider)
	}
	var serr error
	if c.secret != nil {
		v, err := c.secret(name)
		if err == nil && v != "" {
			runtime.RedactValue(v)
			return v, nil
		}
		serr = err
	}
	if v := os.Getenv(name); v != "" {
		runtime.RedactValue(v)
		return v, nil
	}
	msg := fmt.Sprintf("backend %q (%s): API key %s is not set", c.b.Name, c.b.Provider, name)
	if serr != nil {
		msg += fmt.Sprintf(" (secrets: %v)", serr)
	}
	// A configuration error: retrying (on = "transient") cannot fix it.
	return "", &runtime.Error{Class: runtime.ClassConfig, Msg: msg}
}

// maxTokens is the completion cap: the request's when smaller than the
// backend's, else the backend's, else the wire default.
func (c *client) maxTokens(req *intel.Request) int {
	n := c.b.MaxTokens
	if req.MaxTokens > 0 && (n == 0 || req.MaxTokens < n) {
		n = req.MaxTokens
	}
	if n == 0 {
		n = 1024
	}
	return n
}

// call POSTs body and decodes a 2xx reply into out.
func (c *client) call(ctx context.Context, url string, header http.Header, key string, body any, out any) error {
	data, err := runtime.EncodeJSON(body)
	if err != nil {
		return err
	}
	reply, err := post.JSON(ctx, url, header, data, key)
	if err != nil {
		return fmt.Errorf("backend %q (%s): %w", c.b.Name, c.b.Provider, err)
	}
	if err := json.Unmarshal(reply, out); err != nil {
		return fmt.Errorf("backend %q (%s): malformed response: %v: %s", c.b.Name, c.b.Provider, err, post.Excerpt(reply, key))
	}
	return nil
}

// splitSystem separates system messages (joined) from the conversation;
// Anthropic and Gemini take the system prompt in a field of its own.
func splitSystem(msgs []intel.Message) (system string, rest []intel.Message) {
	var sys []string
	for _, m := range msgs {
		if m.Role == "system" {
			sys = append(sys, m.Content)
			continue
		}
		rest = append(rest, m)
	}
	return strings.Join(sys, "\n\n"), rest
}
