package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
)

// openai speaks Chat Completions: POST {base}/v1/chat/completions. A
// base_url that already ends in /v1 (common for compatible servers) is not
// given a second one.
type openai struct{ *client }

type openaiRequest struct {
	Model    string          `json:"model"`
	Messages []intel.Message `json:"messages"`
	// OpenAI itself deprecated max_tokens for max_completion_tokens (its
	// reasoning models refuse the old name); compatible servers (vLLM,
	// llama.cpp, Ollama) read max_tokens.
	MaxTokens           int `json:"max_tokens,omitempty"`
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
}

type openaiResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal string  `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

func (o *openai) Complete(ctx context.Context, req *intel.Request) (*intel.Response, error) {
	key, err := o.key()
	if err != nil {
		return nil, err
	}
	body := openaiRequest{Model: o.b.Model, Messages: req.Messages}
	if o.b.Provider == "openai" {
		body.MaxCompletionTokens = o.maxTokens(req)
	} else {
		body.MaxTokens = o.maxTokens(req)
	}
	header := http.Header{}
	if key != "" {
		header.Set("Authorization", "Bearer "+key)
	}
	url := strings.TrimSuffix(o.base, "/v1") + "/v1/chat/completions"
	var out openaiResponse
	if err := o.call(ctx, url, header, key, body, &out); err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, fmt.Errorf("backend %q (%s): response has no choices", o.b.Name, o.b.Provider)
	}
	msg := out.Choices[0].Message
	if msg.Content == nil {
		if msg.Refusal != "" {
			return nil, fmt.Errorf("backend %q (%s): the model refused: %s", o.b.Name, o.b.Provider, msg.Refusal)
		}
		return nil, fmt.Errorf("backend %q (%s): response has no content (finish_reason %q)", o.b.Name, o.b.Provider, out.Choices[0].FinishReason)
	}
	return &intel.Response{Content: *msg.Content, Usage: intel.Usage{
		PromptTokens: out.Usage.PromptTokens, CompletionTokens: out.Usage.CompletionTokens}}, nil
}
