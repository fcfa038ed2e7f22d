package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
)

// gemini speaks generateContent: POST {base}/v1beta/models/{model}:generateContent.
type gemini struct{ *client }

type geminiPart struct {
	Text string `json:"text"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction,omitempty"`
	GenerationConfig  struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

type geminiResponse struct {
	Candidates []struct {
		Content      geminiContent `json:"content"`
		FinishReason string        `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata struct {
		PromptTokenCount     int64 `json:"promptTokenCount"`
		CandidatesTokenCount int64 `json:"candidatesTokenCount"`
	} `json:"usageMetadata"`
}

func (g *gemini) Complete(ctx context.Context, req *intel.Request) (*intel.Response, error) {
	key, err := g.key()
	if err != nil {
		return nil, err
	}
	system, msgs := splitSystem(req.Messages)
	var body geminiRequest
	body.Contents = []geminiContent{}
	for _, m := range msgs {
		role := "user"
		if m.Role == "assistant" {
			role = "model" // Gemini's name for the assistant turn
		}
		body.Contents = append(body.Contents, geminiContent{Role: role, Parts: []geminiPart{{Text: m.Content}}})
	}
	if system != "" {
		body.SystemInstruction = &geminiContent{Parts: []geminiPart{{Text: system}}}
	}
	body.GenerationConfig.MaxOutputTokens = g.maxTokens(req)
	header := http.Header{}
	header.Set("x-goog-api-key", key)
	model := strings.TrimPrefix(g.b.Model, "models/")
	endpoint := g.base + "/v1beta/models/" + url.PathEscape(model) + ":generateContent"
	var out geminiResponse
	if err := g.call(ctx, endpoint, header, key, body, &out); err != nil {
		return nil, err
	}
	if len(out.Candidates) == 0 {
		reason := ""
		if out.PromptFeedback != nil {
			reason = out.PromptFeedback.BlockReason
		}
		return nil, fmt.Errorf("backend %q (gemini): response has no candidates (block reason %q)", g.b.Name, reason)
	}
	var text strings.Builder
	for _, p := range out.Candidates[0].Content.Parts {
		text.WriteString(p.Text)
	}
	return &intel.Response{Content: text.String(), Usage: intel.Usage{
		PromptTokens: out.UsageMetadata.PromptTokenCount, CompletionTokens: out.UsageMetadata.CandidatesTokenCount}}, nil
}
