// Package post sends one JSON POST to an intelligence endpoint (the HTTP
// transport and the remote providers) with the limits both need: bounded
// response bodies, no redirects, the SSRF guard, no proxy, bounded error
// excerpts with secrets masked.
package post

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/runtime"
)

const (
	// MaxBody caps a response body, like the Unix transport's frame cap.
	MaxBody = 16 << 20
	// ExcerptLen bounds how much of an error body goes into an error text.
	ExcerptLen = 512
)

// client never follows redirects: a 3xx could carry the credential to a
// host nobody configured, so it comes back as a non-2xx error instead.
// Every URL it is handed is configured (a backend's base_url,
// --intel-http), so its host is a named host to the SSRF guard: local and
// on-premises backends work, a name resolving to a link-local or metadata
// address is refused at the dial. No proxy from the environment (see
// docs/intelligence.md).
var client = &http.Client{
	Transport:     netguard.NewTransport(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// StatusError is a non-2xx reply.
type StatusError struct {
	Status  int
	Excerpt string // at most ExcerptLen bytes of the body, secrets masked
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.Excerpt != "" {
		msg += ": " + e.Excerpt
	}
	return msg
}

// JSON POSTs body (already encoded JSON) to url with header and returns
// the body of a 2xx reply. Network failures and oversize bodies say
// "transport fault"; a non-2xx reply is a *StatusError. Every string in
// secrets is masked out of error excerpts.
func JSON(ctx context.Context, url string, header http.Header, body []byte, secrets ...string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("transport fault: %w", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("transport fault: %w", stripURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("transport fault: reading the response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &StatusError{Status: resp.StatusCode, Excerpt: Excerpt(data, secrets...)}
	}
	if len(data) > MaxBody {
		return nil, fmt.Errorf("transport fault: response body exceeds %d bytes", MaxBody)
	}
	return data, nil
}

// stripURL drops the *url.Error wrapper, whose text repeats the URL, but
// keeps the cause chain, so errors.Is(err, context.DeadlineExceeded) holds.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("POST: %w", ue.Err)
	}
	return err
}

// Excerpt returns at most ExcerptLen bytes of body as valid UTF-8 on one
// line, with every secret replaced by [REDACTED].
func Excerpt(body []byte, secrets ...string) string {
	s := runtime.Redact(string(body))
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > ExcerptLen {
		cut := ExcerptLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
