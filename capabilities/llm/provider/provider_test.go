package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// capture is a provider endpoint: it records the request and answers with
// a canned response body in the provider's real shape.
type capture struct {
	method, path string
	header       http.Header
	body         map[string]any
	hits         atomic.Int64
}

func endpoint(t *testing.T, status int, reply string) (*httptest.Server, *capture) {
	t.Helper()
	c := &capture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		c.method, c.path, c.header = r.Method, r.URL.Path, r.Header.Clone()
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &c.body); err != nil {
			t.Errorf("request body is not JSON: %s", data)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	return srv, c
}

var conversation = []intel.Message{
	{Role: "system", Content: "be terse"},
	{Role: "user", Content: "hello"},
	{Role: "assistant", Content: "hi"},
	{Role: "user", Content: "classify: great"},
}

func noSecret(string) (string, error) { return "", errors.New("no such secret") }

func TestAnthropicRequestAndResponse(t *testing.T) {
	srv, got := endpoint(t, 200, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-x",
		"content":[{"type":"text","text":"posi"},{"type":"text","text":"tive"}],
		"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":2}}`)
	secrets := func(name string) (string, error) {
		if name == "ANTHROPIC_KEY" {
			return "sk-ant-secret", nil
		}
		return "", errors.New("unknown")
	}
	c, err := New(workflow.Backend{Name: "claude", Provider: "anthropic", Model: "claude-x", APIKeyEnv: "ANTHROPIC_KEY",
		BaseURL: srv.URL, MaxTokens: 300}, secrets)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), &intel.Request{Messages: conversation})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "positive" || resp.Usage.PromptTokens != 25 || resp.Usage.CompletionTokens != 2 {
		t.Fatalf("resp = %+v", resp)
	}
	if got.method != "POST" || got.path != "/v1/messages" {
		t.Fatalf("%s %s", got.method, got.path)
	}
	if got.header.Get("x-api-key") != "sk-ant-secret" || got.header.Get("anthropic-version") != "2023-06-01" ||
		got.header.Get("Content-Type") != "application/json" || got.header.Get("Authorization") != "" {
		t.Fatalf("headers = %v", got.header)
	}
	if got.body["model"] != "claude-x" || got.body["max_tokens"] != float64(300) || got.body["system"] != "be terse" {
		t.Fatalf("body = %v", got.body)
	}
	msgs := got.body["messages"].([]any)
	if len(msgs) != 3 || msgs[0].(map[string]any)["role"] != "user" || msgs[1].(map[string]any)["role"] != "assistant" {
		t.Fatalf("messages = %v (system must not be among them)", msgs)
	}
}

func TestOpenAIRequestAndResponse(t *testing.T) {
	srv, got := endpoint(t, 200, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x",
		"choices":[{"index":0,"message":{"role":"assistant","content":"{\"label\":\"pos\"}","refusal":null},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":40,"completion_tokens":7,"total_tokens":47}}`)
	t.Setenv("OPENAI_TEST_KEY", "sk-openai-secret")
	c, err := New(workflow.Backend{Name: "gpt", Provider: "openai", Model: "gpt-x", APIKeyEnv: "OPENAI_TEST_KEY", BaseURL: srv.URL + "/"}, noSecret)
	if err != nil {
		t.Fatal(err)
	}
	// A node cap below the backend's (unset here: the default 1024) wins.
	resp, err := c.Complete(context.Background(), &intel.Request{Messages: conversation, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != `{"label":"pos"}` || resp.Usage.PromptTokens != 40 || resp.Usage.CompletionTokens != 7 {
		t.Fatalf("resp = %+v", resp)
	}
	if got.path != "/v1/chat/completions" || got.header.Get("Authorization") != "Bearer sk-openai-secret" {
		t.Fatalf("%s %v", got.path, got.header)
	}
	if got.body["model"] != "gpt-x" || got.body["max_completion_tokens"] != float64(64) || got.body["max_tokens"] != nil {
		t.Fatalf("body = %v", got.body)
	}
	msgs := got.body["messages"].([]any)
	if len(msgs) != 4 || msgs[0].(map[string]any)["role"] != "system" {
		t.Fatalf("messages = %v", msgs)
	}
}

func TestOpenAICompatible(t *testing.T) {
	srv, got := endpoint(t, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
	// base_url with /v1 already (how local servers document themselves) and no key.
	c, err := New(workflow.Backend{Name: "local", Provider: "openai-compatible", Model: "llama", BaseURL: srv.URL + "/v1", MaxTokens: 50}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), &intel.Request{Messages: conversation[1:2], MaxTokens: 500})
	if err != nil || resp.Content != "ok" {
		t.Fatalf("%+v %v", resp, err)
	}
	if got.path != "/v1/chat/completions" || got.header.Get("Authorization") != "" {
		t.Fatalf("%s %v", got.path, got.header)
	}
	// The backend's max_tokens caps a larger node request.
	if got.body["max_tokens"] != float64(50) || got.body["model"] != "llama" {
		t.Fatalf("body = %v", got.body)
	}
}

func TestGeminiRequestAndResponse(t *testing.T) {
	srv, got := endpoint(t, 200, `{"candidates":[{"content":{"parts":[{"text":"neg"},{"text":"ative"}],"role":"model"},
		"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":2,"totalTokenCount":13},
		"modelVersion":"gemini-x"}`)
	t.Setenv("GEMINI_TEST_KEY", "g-secret")
	c, err := New(workflow.Backend{Name: "gem", Provider: "gemini", Model: "models/gemini-x", APIKeyEnv: "GEMINI_TEST_KEY", BaseURL: srv.URL, MaxTokens: 99}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), &intel.Request{Messages: conversation})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "negative" || resp.Usage.PromptTokens != 11 || resp.Usage.CompletionTokens != 2 {
		t.Fatalf("resp = %+v", resp)
	}
	if got.path != "/v1beta/models/gemini-x:generateContent" || got.header.Get("x-goog-api-key") != "g-secret" {
		t.Fatalf("%s %v", got.path, got.header)
	}
	contents := got.body["contents"].([]any)
	if len(contents) != 3 || contents[1].(map[string]any)["role"] != "model" ||
		contents[2].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"] != "classify: great" {
		t.Fatalf("contents = %v", contents)
	}
	sys := got.body["systemInstruction"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"]
	if sys != "be terse" || got.body["generationConfig"].(map[string]any)["maxOutputTokens"] != float64(99) {
		t.Fatalf("body = %v", got.body)
	}
}

func TestNon2xxHasBoundedExcerptWithoutKey(t *testing.T) {
	for _, prov := range []string{"anthropic", "openai", "gemini"} {
		t.Run(prov, func(t *testing.T) {
			srv, _ := endpoint(t, 401, `{"error":{"message":"Incorrect API key provided: key-XYZZY-123. `+strings.Repeat("pad ", 400)+`"}}`)
			t.Setenv("PROV_KEY", "key-XYZZY-123")
			c, err := New(workflow.Backend{Name: "b", Provider: prov, Model: "m", APIKeyEnv: "PROV_KEY", BaseURL: srv.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Complete(context.Background(), &intel.Request{Messages: conversation[1:2]})
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "HTTP 401") || !strings.Contains(msg, "Incorrect API key") || !strings.Contains(msg, `backend "b"`) {
				t.Fatalf("error = %q", msg)
			}
			if strings.Contains(msg, "key-XYZZY-123") {
				t.Fatalf("key leaked: %q", msg)
			}
			if len(msg) > 700 {
				t.Fatalf("error is %d bytes, excerpt unbounded", len(msg))
			}
		})
	}
}

func TestMissingKeyFailsBeforeSending(t *testing.T) {
	srv, got := endpoint(t, 200, `{}`)
	c, err := New(workflow.Backend{Name: "b", Provider: "anthropic", Model: "m", APIKeyEnv: "KILN_TEST_UNSET_KEY_42", BaseURL: srv.URL}, noSecret)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), &intel.Request{Messages: conversation[1:2]})
	if err == nil || !strings.Contains(err.Error(), "KILN_TEST_UNSET_KEY_42 is not set") {
		t.Fatalf("err = %v", err)
	}
	if got.hits.Load() != 0 {
		t.Fatal("a request went out without a key")
	}
}

func TestKeyReadAtRequestTime(t *testing.T) {
	srv, got := endpoint(t, 200, `{"choices":[{"message":{"content":"x"}}]}`)
	c, err := New(workflow.Backend{Name: "b", Provider: "openai", Model: "m", APIKeyEnv: "KILN_TEST_LATE_KEY", BaseURL: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KILN_TEST_LATE_KEY", "first")
	if _, err := c.Complete(context.Background(), &intel.Request{Messages: conversation[1:2]}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KILN_TEST_LATE_KEY", "rotated")
	if _, err := c.Complete(context.Background(), &intel.Request{Messages: conversation[1:2]}); err != nil {
		t.Fatal(err)
	}
	if got.header.Get("Authorization") != "Bearer rotated" {
		t.Fatalf("key was not re-read: %v", got.header.Get("Authorization"))
	}
	if runtime.Redact("token rotated here") != "token [REDACTED] here" {
		t.Fatal("resolved key was not registered for redaction")
	}
}

func TestMalformedProviderResponses(t *testing.T) {
	cases := []struct{ prov, reply, want string }{
		{"openai", `{"choices":[]}`, "no choices"},
		{"openai", `{"choices":[{"message":{"content":null,"refusal":"no way"}}]}`, "refused: no way"},
		{"gemini", `{"candidates":[],"promptFeedback":{"blockReason":"SAFETY"}}`, `block reason "SAFETY"`},
		{"anthropic", `{"content":[],"stop_reason":"max_tokens"}`, "no content"},
		{"anthropic", `not json`, "malformed response"},
	}
	for _, tc := range cases {
		srv, _ := endpoint(t, 200, tc.reply)
		t.Setenv("K", "k")
		c, err := New(workflow.Backend{Name: "b", Provider: tc.prov, Model: "m", APIKeyEnv: "K", BaseURL: srv.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Complete(context.Background(), &intel.Request{Messages: conversation[1:2]})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: err = %v, want %q", tc.prov, tc.reply, err, tc.want)
		}
	}
}

func TestNewRejectsBadBackends(t *testing.T) {
	cases := []struct {
		b    workflow.Backend
		want string
	}{
		{workflow.Backend{Name: "x", Provider: "cohere", Model: "m"}, `provider "cohere" must be anthropic, openai, gemini or openai-compatible`},
		{workflow.Backend{Name: "x", Provider: "anthropic"}, "model is required"},
		{workflow.Backend{Name: "x", Provider: "openai-compatible", Model: "m"}, "base_url is required"},
		{workflow.Backend{Name: "x", Provider: "openai", Model: "m", BaseURL: "ftp://h"}, "must be an http(s) URL"},
		{workflow.Backend{Name: "x", Provider: "openai", Model: "m", MaxTokens: -1}, "max_tokens"},
	}
	for _, tc := range cases {
		if _, err := New(tc.b, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.b, err, tc.want)
		}
	}
	for prov, base := range map[string]string{"anthropic": AnthropicBaseURL, "openai": OpenAIBaseURL, "gemini": GeminiBaseURL} {
		c, err := New(workflow.Backend{Name: "d", Provider: prov, Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var cl *client
		switch v := c.(type) {
		case *anthropic:
			cl = v.client
		case *openai:
			cl = v.client
		case *gemini:
			cl = v.client
		}
		if cl.base != base {
			t.Errorf("%s default base = %s", prov, cl.base)
		}
	}
}
