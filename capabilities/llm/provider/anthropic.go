package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
)

// anthropic speaks the Messages API: POST {base}/v1/messages.
type anthropic struct{ *client }

type anthropicRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    string          `json:"system,omitempty"`
	Messages  []intel.Message `json:"messages"`
}

type anthropicResponse struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

func (a *anthropic) Complete(ctx context.Context, req *intel.Request) (*intel.Response, error) {
	key, err := a.key()
	if err != nil {
		return nil, err
	}
	system, msgs := splitSystem(req.Messages)
	body := anthropicRequest{Model: a.b.Model, MaxTokens: a.maxTokens(req), System: system, Messages: msgs}
	header := http.Header{}
	header.Set("x-api-key", key)
	header.Set("anthropic-version", AnthropicVersion)
	var out anthropicResponse
	if err := a.call(ctx, a.base+"/v1/messages", header, key, body, &out); err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, c := range out.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	if text.Len() == 0 && len(out.Content) == 0 {
		return nil, fmt.Errorf("backend %q (anthropic): response has no content (stop_reason %q)", a.b.Name, out.StopReason)
	}
	return &intel.Response{Content: text.String(), Usage: intel.Usage{
		PromptTokens: out.Usage.InputTokens, CompletionTokens: out.Usage.OutputTokens}}, nil
}
