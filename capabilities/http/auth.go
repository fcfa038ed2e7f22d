package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	httpspec "github.com/kilnworks/kiln/capabilities/http/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Verifier checks one request's credentials. body is the raw request
// body (hmac signs it). The name it returns and the auth kind become the
// run's trigger.principal = {kind, name}. A non-nil error is a denial;
// its text is the 401 detail, so it must never contain a secret.
type Verifier interface {
	Verify(r *http.Request, body []byte) (name string, err error)
}

// AuthKind is one kind of route credential (bearer, basic, hmac, mtls,
// oidc, ...). Capability packages register further kinds from init.
type AuthKind struct {
	Name string
	// New builds the verifier of binding (the "ops" of "bearer:ops"). It
	// runs at start-up and again on SIGHUP, so rotated secrets take
	// effect; it must fail closed on missing configuration and pass every
	// secret it resolves to runtime.RedactValue.
	New func(h *runtime.Host, binding string) (Verifier, error)
}

var (
	authMu    sync.RWMutex
	authKinds = map[string]AuthKind{}
)

// RegisterAuthKind registers a route auth kind; called from init.
func RegisterAuthKind(k AuthKind) {
	authMu.Lock()
	defer authMu.Unlock()
	if _, dup := authKinds[k.Name]; dup {
		panic(fmt.Sprintf("kiln: http auth kind %q registered twice", k.Name))
	}
	authKinds[k.Name] = k
}

func lookupAuthKind(name string) (AuthKind, bool) {
	authMu.RLock()
	defer authMu.RUnlock()
	k, ok := authKinds[name]
	return k, ok
}

func registeredAuthKinds() []string {
	authMu.RLock()
	defer authMu.RUnlock()
	out := make([]string, 0, len(authKinds))
	for k := range authKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parseAuthRef splits a route's auth reference: "" and "none" are open,
// "kind" means "kind:default", "kind:name" names a binding.
func parseAuthRef(ref string) (kind, binding string) {
	if ref == "" || ref == "none" {
		return "", ""
	}
	kind, binding, ok := strings.Cut(ref, ":")
	if !ok {
		binding = "default"
	}
	return kind, binding
}

// The built-in auth kinds. The generated program registers those its
// routes use, so the others are not linked; a route whose kind is not
// registered is refused at start, never served open.
var (
	AuthBearer = AuthKind{Name: "bearer", New: newBearer}
	AuthBasic  = AuthKind{Name: "basic", New: newBasic}
	AuthHMAC   = AuthKind{Name: "hmac", New: newHMAC}
	AuthMTLS   = AuthKind{Name: "mtls", New: newMTLS}
)

// RegisterAuthKinds registers every built-in auth kind (capabilities/all,
// for kiln run).
func RegisterAuthKinds() {
	for _, k := range []AuthKind{AuthBearer, AuthBasic, AuthHMAC, AuthMTLS} {
		RegisterAuthKind(k)
	}
}

// secretLines gathers newline-separated entries from an environment
// variable, a [[secrets]] entry and a literal list, registering each with
// the redactor.
func secretLines(h *runtime.Host, env, secret string, literal []string) ([]string, error) {
	var out []string
	add := func(text string) {
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if line != "" {
				runtime.RedactValue(line)
				out = append(out, line)
			}
		}
	}
	if env != "" {
		v, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("environment variable %s is unset or empty", env)
		}
		add(v)
	}
	if secret != "" {
		v, err := resolveSecret(h, secret)
		if err != nil {
			return nil, err
		}
		add(v)
	}
	for _, l := range literal {
		add(l)
	}
	if len(out) == 0 {
		return nil, errors.New("no credentials configured")
	}
	return out, nil
}

func resolveSecret(h *runtime.Host, name string) (string, error) {
	s := h.Engine.Services
	if s == nil || s.Secret == nil {
		return "", fmt.Errorf("secret %q cannot be resolved: no secrets registry is configured", name)
	}
	v, err := s.Secret(name)
	if err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	if v == "" {
		return "", fmt.Errorf("secret %q is empty", name)
	}
	runtime.RedactValue(v)
	return v, nil
}

// digestSet compares a candidate against a set of secrets in constant
// time: every entry is compared through its SHA-256, so neither the
// matching entry nor any length leaks through timing.
type digestSet [][sha256.Size]byte

func newDigestSet(entries []string) digestSet {
	d := make(digestSet, len(entries))
	for i, e := range entries {
		d[i] = sha256.Sum256([]byte(e))
	}
	return d
}

func (d digestSet) contains(candidate string) bool {
	c := sha256.Sum256([]byte(candidate))
	found := 0
	for i := range d {
		found |= subtle.ConstantTimeCompare(d[i][:], c[:])
	}
	return found == 1
}

// authSpec returns the workflow's [auth] block (empty when absent).
func authSpec(h *runtime.Host) *workflow.Auth {
	if a := h.Program.Workflow.Auth; a != nil {
		return a
	}
	return &workflow.Auth{}
}

// singleCredential refuses, before any auth check on a route with auth
// (every kind, also hmac and mtls, which do not read the header), a
// request whose Authorization could be read two ways: more than one
// Authorization field line, or one value holding a comma. Every kind
// here takes a single token68 credential (Bearer, Basic, and oidc's
// Bearer), which has no comma, so a comma can only join a second
// credential: that is how HTTP lets an intermediary fold two field lines
// into one, and a proxy in front may have checked one credential while
// the verifier reads the other.
func singleCredential(h http.Header) error {
	values := h.Values("Authorization")
	if len(values) > 1 {
		return fmt.Errorf("%d Authorization headers; send exactly one credential", len(values))
	}
	if len(values) == 1 && strings.Contains(values[0], ",") {
		return errors.New("the Authorization header holds more than one credential (a comma); send exactly one")
	}
	return nil
}

// bearer: Authorization: Bearer <token>; principal name = binding name.
type bearerVerifier struct {
	binding string
	tokens  digestSet
}

func newBearer(h *runtime.Host, binding string) (Verifier, error) {
	b, ok := authSpec(h).Bearer[binding]
	if !ok {
		return nil, fmt.Errorf("no [auth.bearer.%s] binding", binding)
	}
	if err := spec.Err(httpspec.CheckBearer(authSpec(h), binding, spec.ForWorkflow(h.Program.Workflow))); err != nil {
		return nil, err
	}
	tokens, err := secretLines(h, b.TokensEnv, b.TokensSecret, b.Tokens)
	if err != nil {
		return nil, err
	}
	return &bearerVerifier{binding: binding, tokens: newDigestSet(tokens)}, nil
}

func (v *bearerVerifier) Verify(r *http.Request, _ []byte) (string, error) {
	tok, ok := bearerToken(r)
	if !ok {
		return "", errors.New("missing bearer token")
	}
	if !v.tokens.contains(tok) {
		return "", errors.New("bearer token not accepted")
	}
	return v.binding, nil
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// BearerToken exposes the bearer-token parser to other auth kinds (oidc).
func BearerToken(r *http.Request) (string, bool) { return bearerToken(r) }

// basic: RFC 7617 with strict base64; principal name = the user.
type basicVerifier struct {
	creds digestSet
}

func newBasic(h *runtime.Host, binding string) (Verifier, error) {
	b, ok := authSpec(h).Basic[binding]
	if !ok {
		return nil, fmt.Errorf("no [auth.basic.%s] binding", binding)
	}
	if err := spec.Err(httpspec.CheckBasic(authSpec(h), binding, spec.ForWorkflow(h.Program.Workflow))); err != nil {
		return nil, err
	}
	creds, err := secretLines(h, b.CredentialsEnv, b.CredentialsSecret, b.Credentials)
	if err != nil {
		return nil, err
	}
	for i, c := range creds {
		user, pass, ok := strings.Cut(c, ":")
		if !ok || user == "" || pass == "" {
			return nil, fmt.Errorf("credential entry %d is not user:password", i+1)
		}
		runtime.RedactValue(pass)
	}
	return &basicVerifier{creds: newDigestSet(creds)}, nil
}

func (v *basicVerifier) Verify(r *http.Request, _ []byte) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, enc, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", errors.New("missing basic credentials")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", errors.New("basic credentials are not valid base64")
	}
	user, _, ok := strings.Cut(string(raw), ":")
	if !ok || user == "" {
		return "", errors.New("basic credentials are not user:password")
	}
	if !v.creds.contains(string(raw)) {
		return "", errors.New("basic credentials not accepted")
	}
	return user, nil
}

// hmac: HMAC-SHA256 of the body (or of timestamp + "." + body when a
// timestamp header is configured) in hex, after the prefix.
type hmacVerifier struct {
	binding   string
	secret    []byte
	header    string
	prefix    string
	tsHeader  string
	tolerance time.Duration
	now       func() time.Time
}

func newHMAC(h *runtime.Host, binding string) (Verifier, error) {
	c, ok := authSpec(h).HMAC[binding]
	if !ok {
		return nil, fmt.Errorf("no [auth.hmac.%s] binding", binding)
	}
	if err := spec.Err(httpspec.CheckHMAC(authSpec(h), binding, spec.ForWorkflow(h.Program.Workflow))); err != nil {
		return nil, err
	}
	secret, err := hmacSecret(h, c)
	if err != nil {
		return nil, err
	}
	v := &hmacVerifier{binding: binding, secret: []byte(secret), header: "X-Agent-Signature", prefix: "sha256=",
		tsHeader: c.TimestampHeader, tolerance: 300 * time.Second, now: hostNow(h)}
	if c.Header != "" {
		v.header = c.Header
	}
	if c.Prefix != nil {
		v.prefix = *c.Prefix
	}
	if c.ToleranceSecs != nil {
		v.tolerance = time.Duration(*c.ToleranceSecs) * time.Second
	}
	return v, nil
}

func (v *hmacVerifier) Verify(r *http.Request, body []byte) (string, error) {
	got := r.Header.Get(v.header)
	if got == "" {
		return "", fmt.Errorf("missing %s header", v.header)
	}
	if !strings.HasPrefix(got, v.prefix) {
		return "", fmt.Errorf("%s header lacks the %q prefix", v.header, v.prefix)
	}
	sig, err := hex.DecodeString(strings.TrimPrefix(got, v.prefix))
	if err != nil || len(sig) != sha256.Size {
		return "", fmt.Errorf("%s header is not a hex HMAC-SHA256", v.header)
	}
	mac := hmac.New(sha256.New, v.secret)
	if v.tsHeader != "" {
		ts := r.Header.Get(v.tsHeader)
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return "", fmt.Errorf("missing or malformed %s header", v.tsHeader)
		}
		age := v.now().Sub(time.Unix(sec, 0))
		if age > v.tolerance || age < -v.tolerance {
			return "", fmt.Errorf("%s is outside the %s tolerance (stale or replayed)", v.tsHeader, v.tolerance)
		}
		mac.Write([]byte(ts + "."))
	}
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), sig) {
		return "", errors.New("signature mismatch")
	}
	return v.binding, nil
}

// hmacSecret resolves the one configured secret source (CheckHMAC made
// sure there is exactly one). The whole value is the key (no line
// splitting: a newline would be part of it).
func hmacSecret(h *runtime.Host, c workflow.HMACAuth) (string, error) {
	switch {
	case c.SecretName != "":
		return resolveSecret(h, c.SecretName)
	case c.SecretEnv != "":
		v, ok := os.LookupEnv(c.SecretEnv)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is unset or empty", c.SecretEnv)
		}
		runtime.RedactValue(v)
		return v, nil
	}
	runtime.RedactValue(c.Secret)
	return c.Secret, nil
}

// mtls: the TLS layer already verified the client certificate against
// the configured CA; principal name = sha256:<hex of the leaf's DER>.
type mtlsVerifier struct{}

func newMTLS(h *runtime.Host, binding string) (Verifier, error) {
	if err := spec.Err(httpspec.CheckMTLS(h.Program.Workflow)); err != nil {
		return nil, err
	}
	return mtlsVerifier{}, nil
}

func (mtlsVerifier) Verify(r *http.Request, _ []byte) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return "", errors.New("no verified client certificate")
	}
	sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func hostNow(h *runtime.Host) func() time.Time {
	if h.Engine.Now != nil {
		return h.Engine.Now
	}
	return time.Now
}
