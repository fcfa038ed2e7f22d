package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// commandTimeout bounds a command source.
const commandTimeout = 30 * time.Second

// runCommand runs argv without a shell and returns its trimmed stdout. The
// error says how the command ended, never what it printed.
func runCommand(ctx context.Context, argv []string) (cachedValue, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return cachedValue{}, fmt.Errorf("command %s did not finish within %v", argv[0], commandTimeout)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return cachedValue{}, fmt.Errorf("command %s failed (%s)", argv[0], ee.ProcessState)
		}
		return cachedValue{}, fmt.Errorf("command %s: %v", argv[0], err)
	}
	v := strings.TrimSpace(out.String())
	if v == "" {
		return cachedValue{}, fmt.Errorf("command %s printed nothing", argv[0])
	}
	runtime.RedactValue(v)
	return cachedValue{value: v}, nil
}

// checkTokenURL accepts https, or http to a loopback host (a local token
// broker or a test endpoint): a client secret never crosses a network in
// clear text.
func checkTokenURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("token_url %q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("token_url %q must use https (plain http only to a loopback host)", raw)
}

// tokenClient fetches tokens; no redirects, no proxy from the environment.
// The token_url is configured, so its host is a named host to the SSRF
// guard: loopback and private brokers work, a name resolving to a
// link-local or metadata address is refused at the dial.
var tokenClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: netguard.NewTransport(),
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// fetchToken performs the client-credentials grant (RFC 6749 §4.4).
func (r *Registry) fetchToken(ctx context.Context, s workflow.Secret) (cachedValue, error) {
	id := os.Getenv(s.ClientIDEnv)
	secret := os.Getenv(s.ClientSecretEnv)
	if id == "" {
		return cachedValue{}, fmt.Errorf("client_id_env %s is unset or empty", s.ClientIDEnv)
	}
	if secret == "" {
		return cachedValue{}, fmt.Errorf("client_secret_env %s is unset or empty", s.ClientSecretEnv)
	}
	runtime.RedactValue(secret)

	form := url.Values{}
	for _, k := range runtime.SortedKeys(s.ExtraParams) {
		form.Set(k, s.ExtraParams[k])
	}
	form.Set("grant_type", "client_credentials")
	if len(s.Scopes) > 0 {
		form.Set("scope", strings.Join(s.Scopes, " "))
	}
	basic := s.AuthStyle == "basic"
	if !basic {
		form.Set("client_id", id)
		form.Set("client_secret", secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return cachedValue{}, fmt.Errorf("token request: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 §2.3.1: form-encode both parts before Basic encoding.
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	sent := r.Now()
	resp, err := tokenClient.Do(req)
	if err != nil {
		return cachedValue{}, fmt.Errorf("token endpoint %s: %v", s.TokenURL, runtime.Redact(unwrap(err).Error()))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return cachedValue{}, fmt.Errorf("token endpoint %s: %v", s.TokenURL, err)
	}
	var tok struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
		Error       string          `json:"error"`
	}
	jsonErr := json.Unmarshal(body, &tok)
	if resp.StatusCode != http.StatusOK {
		detail := ""
		if jsonErr == nil && tok.Error != "" && len(tok.Error) < 100 {
			detail = " (" + runtime.Redact(tok.Error) + ")"
		}
		return cachedValue{}, fmt.Errorf("token endpoint %s answered %d%s", s.TokenURL, resp.StatusCode, detail)
	}
	if jsonErr != nil || tok.AccessToken == "" {
		return cachedValue{}, fmt.Errorf("token endpoint %s: response has no access_token", s.TokenURL)
	}
	runtime.RedactValue(tok.AccessToken)
	v := cachedValue{value: tok.AccessToken}
	if secs, ok := expiresIn(tok.ExpiresIn); ok {
		skew := 60
		if s.SkewSecs != nil {
			skew = *s.SkewSecs
		}
		// Measured from when the request was sent, so a slow answer
		// errs towards refreshing early.
		v.expires = sent.Add(time.Duration(secs-int64(skew)) * time.Second)
		if !v.expires.After(sent) {
			v.expires = sent.Add(time.Nanosecond) // shorter-lived than the skew: use once
		}
	}
	return v, nil
}

// expiresIn reads expires_in as a number or numeric string; absent means
// the token does not expire (it is refreshed on SIGHUP).
func expiresIn(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	s := strings.Trim(string(raw), `"`)
	var n json.Number = json.Number(s)
	i, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil {
			return 0, false
		}
		i = int64(f)
	}
	return i, true
}

func unwrap(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
