package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

// Secret values are redacted at the sinks only: the audit log, stdout and
// stderr, the outcome JSON, --record files, checkpoints, HTTP replies,
// spans and error texts. Node outputs (workflow data) keep the values they
// carry, so a secret that also appears in data (a token "up" and a reply
// {"state":"up"}) never changes what later nodes see. JSON sinks go through
// RedactJSON, which rewrites string values only: the output stays valid
// JSON and object keys, numbers, booleans and null are left as they are (a
// secret used as an object key is the workflow author's choice).

// RedactedMarker replaces every registered secret value.
const RedactedMarker = "[REDACTED]"

// ShortSecretLen is the length, in characters, under which a registered
// secret is reported (WarnShortSecrets): redacting a value that short
// hides unrelated text wherever it happens to occur.
const ShortSecretLen = 8

var (
	redactMu      sync.Mutex
	redactSecrets = map[string]bool{}
	redactor      atomic.Pointer[redactSet]
)

// redactSet is the registered secrets, replaced whole on every
// registration.
type redactSet struct {
	rep   *strings.Replacer
	forms []string // every registered form, longest first
}

// scanMax is how many forms contains checks one by one. A text that holds
// none (nearly every text) is then returned as it is, without the copy
// strings.Replacer makes of it; beyond that many, the replacer's single
// pass is cheaper than one scan per form.
const scanMax = 16

func (rs *redactSet) contains(s string) bool {
	if len(rs.forms) > scanMax {
		return true
	}
	for _, f := range rs.forms {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

func (rs *redactSet) containsBytes(b []byte) bool { return rs.contains(view(b)) }

// view returns b as a string without copying it, for the searches of this
// file, which only read it while they run: strings.Index is linked anyway,
// and bytes.Index would add 2 KiB to every sealed binary.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (rs *redactSet) redact(s string) string {
	if !rs.contains(s) {
		return s
	}
	return rs.rep.Replace(s)
}

// RedactValue registers a secret value whose name is not known: from now
// on it is replaced by [REDACTED] in every sink. Everything that resolves a
// secret must call it (or RedactSecret) before the value can reach a sink.
func RedactValue(secret string) { RedactSecret("", secret) }

// RedactSecret is RedactValue for a secret known by name (a [[secrets]]
// entry, an environment variable): a value shorter than ShortSecretLen is
// reported under that name, never with its value.
func RedactSecret(name, secret string) {
	if secret == "" {
		return
	}
	register(secret)
	if utf8.RuneCountInString(secret) < ShortSecretLen {
		noteShort(name, secret)
	}
}

func register(secret string) {
	redactMu.Lock()
	defer redactMu.Unlock()
	forms := []string{secret}
	// The value as it appears inside a JSON string (quotes, backslashes,
	// control characters escaped), so JSON inside plain text (an error
	// quoting a request body) is covered too.
	if b, err := EncodeJSON(secret); err == nil {
		if esc := string(b[1 : len(b)-1]); esc != secret {
			forms = append(forms, esc)
		}
	}
	added := false
	for _, f := range forms {
		if !redactSecrets[f] {
			redactSecrets[f] = true
			added = true
		}
	}
	if !added {
		return
	}
	all := make([]string, 0, len(redactSecrets))
	for s := range redactSecrets {
		all = append(all, s)
	}
	// Longest first: when one secret contains another, the whole of the
	// longer one is replaced.
	sort.Slice(all, func(i, j int) bool {
		if len(all[i]) != len(all[j]) {
			return len(all[i]) > len(all[j])
		}
		return all[i] < all[j]
	})
	redactor.Store(newRedactSet(all))
}

// newRedactSet builds the set of forms, which must be sorted longest first.
func newRedactSet(forms []string) *redactSet {
	pairs := make([]string, 0, 2*len(forms))
	for _, s := range forms {
		pairs = append(pairs, s, RedactedMarker)
	}
	return &redactSet{rep: strings.NewReplacer(pairs...), forms: forms}
}

// holdsSecret reports whether s may hold a registered secret value (when
// it does not, Redact returns it as it is).
func holdsSecret(s string) bool {
	rs := redactor.Load()
	return rs != nil && rs.contains(s)
}

// Redact replaces every registered secret value in the plain text s with
// [REDACTED].
func Redact(s string) string {
	rs := redactor.Load()
	if rs == nil {
		return s
	}
	return rs.redact(s)
}

// RedactBytes is Redact for plain text as bytes. b itself is returned when
// it holds no secret. JSON goes through RedactJSON instead.
func RedactBytes(b []byte) []byte {
	rs := redactor.Load()
	if rs == nil || !rs.containsBytes(b) {
		return b
	}
	return []byte(rs.rep.Replace(string(b)))
}

// RedactJSON replaces every registered secret value inside the string
// values of the JSON text b, comparing on the decoded strings (a secret is
// found behind escapes too) and encoding what remains again. Object keys,
// numbers, booleans, null, layout and structure are kept, so valid JSON
// stays valid. b itself is returned when nothing changed; text that is not
// JSON is redacted as plain text.
func RedactJSON(b []byte) []byte {
	rs := redactor.Load()
	if rs == nil {
		return b
	}
	if canonicalJSON(b) && !rs.containsBytes(b) {
		return b
	}
	out, err := redactJSONStrings(rs, b)
	if err != nil {
		return RedactBytes(b) // not JSON: never let a secret through
	}
	return out
}

// canonicalJSON reports whether every string of the JSON text b is written
// as EncodeJSON writes it: valid UTF-8, U+2028 and U+2029 escaped, and
// every escape the one EncodeJSON uses for its character. Encoding a
// string escapes it character by character, so a string of such a text
// holds a secret only where the text holds the secret's raw or encoded
// form, and RedactValue registers both: a text without either needs no
// decoding (most output, kiln's own encoding included).
func canonicalJSON(b []byte) bool {
	if !utf8.Valid(b) || strings.Contains(view(b), "\u2028") || strings.Contains(view(b), "\u2029") {
		return false
	}
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return true
		}
		i += j
		if i+1 >= len(b) {
			return false
		}
		switch b[i+1] {
		case '"', '\\', 'b', 'f', 'n', 'r', 't':
			i += 2
			continue
		case 'u':
		default:
			return false // \/ and the like
		}
		if i+6 > len(b) {
			return false
		}
		switch hex := string(b[i+2 : i+6]); {
		case hex == "2028" || hex == "2029":
		case hex[:2] == "00" && (hex[2] == '0' || hex[2] == '1') && strings.IndexByte("0123456789abcdef", hex[3]) >= 0:
			// \u00XX is EncodeJSON's form for control characters except
			// those with a short escape.
			switch hex {
			case "0008", "0009", "000a", "000c", "000d":
				return false
			}
		default:
			return false
		}
		i += 6
	}
}

// redactJSONStrings rewrites the string values of b that hold a secret.
// b must be one JSON value: then a quote always opens or closes a string,
// and a string is an object key exactly when the next byte after it,
// whitespace aside, is ':'. (A scan rather than json.Decoder.Token, which
// would add 4 KiB to every sealed binary.)
func redactJSONStrings(rs *redactSet, b []byte) ([]byte, error) {
	if !json.Valid(b) {
		return nil, errors.New("not a JSON value")
	}
	var out []byte // nil until the first change
	copied := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start, plain := i, true
		for i++; b[i] != '"'; i++ { // valid JSON: the string is closed
			if b[i] == '\\' {
				i, plain = i+1, false
			}
		}
		end := i + 1
		j := end
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
			j++
		}
		if j < len(b) && b[j] == ':' {
			continue // an object key
		}
		var str string
		if plain && utf8.Valid(b[start+1:i]) {
			str = string(b[start+1 : i])
		} else if err := json.Unmarshal(b[start:end], &str); err != nil {
			return nil, err
		}
		red := rs.redact(str)
		if red == str {
			continue
		}
		enc, err := EncodeJSON(red)
		if err != nil {
			return nil, err
		}
		out = append(append(out, b[copied:start]...), enc...)
		copied = end
	}
	if out == nil {
		return b, nil
	}
	return append(out, b[copied:]...), nil
}

// RedactTree returns the JSON value v (maps, slices, strings, numbers)
// with every registered secret replaced in its string values; object keys
// are kept. v is never modified: a container is copied when something
// inside it changed, and v itself is returned when nothing did.
func RedactTree(v any) any {
	rs := redactor.Load()
	if rs == nil {
		return v
	}
	out, _ := redactTree(rs, v)
	return out
}

func redactTree(rs *redactSet, v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, json.Number, float64, int, int64:
		return v, false
	case string:
		red := rs.redact(x)
		return red, red != x
	case map[string]any:
		var cp map[string]any
		for k, e := range x {
			if red, changed := redactTree(rs, e); changed {
				if cp == nil {
					// A loop, not maps.Clone: it would add 1.5 KiB of
					// map cloning code to every sealed binary.
					cp = make(map[string]any, len(x))
					for k, e := range x {
						cp[k] = e
					}
				}
				cp[k] = red
			}
		}
		if cp == nil {
			return x, false
		}
		return cp, true
	case []any:
		var cp []any
		for i, e := range x {
			if red, changed := redactTree(rs, e); changed {
				if cp == nil {
					cp = slices.Clone(x)
				}
				cp[i] = red
			}
		}
		if cp == nil {
			return x, false
		}
		return cp, true
	}
	// Any other Go value is redacted through its JSON form.
	b, err := EncodeJSON(v)
	if err != nil {
		return v, false // cannot be written to a sink either
	}
	red := RedactJSON(b)
	if bytes.Equal(red, b) {
		return v, false
	}
	dv, err := DecodeJSON(red)
	if err != nil {
		return RedactedMarker, true
	}
	return dv, true
}

// RedactBody redacts an HTTP reply body by its content type: JSON media
// types (application/json, anything+json) through RedactJSON, everything
// else as plain text.
func RedactBody(contentType string, body []byte) []byte {
	if redactor.Load() == nil {
		return body // no secret registered: nothing to find
	}
	if IsJSONMediaType(contentType) {
		return RedactJSON(body)
	}
	return RedactBytes(body)
}

// IsJSONMediaType reports whether a Content-Type names JSON
// (application/json or anything+json, parameters ignored).
func IsJSONMediaType(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// Short secrets. Each is reported once, to the function WarnShortSecrets
// installs; those registered before it is installed wait for it. A value
// registered without a name and then with one (before it was reported) is
// reported by its name.
var short struct {
	mu      sync.Mutex
	report  func(name string)
	pending []string          // values not reported yet, in registration order
	names   map[string]string // every short value seen -> its name ("" = not known)
}

func noteShort(name, value string) {
	short.mu.Lock()
	if known, ok := short.names[value]; ok { // seen: reported or pending
		if known == "" && name != "" {
			short.names[value] = name
		}
		short.mu.Unlock()
		return
	}
	if short.names == nil {
		short.names = map[string]string{}
	}
	short.names[value] = name
	report := short.report
	if report == nil {
		short.pending = append(short.pending, value)
		short.mu.Unlock()
		return
	}
	short.mu.Unlock()
	report(name)
}

// WarnShortSecrets installs report, called once for every registered
// secret shorter than ShortSecretLen characters with its name ("" when it
// was registered without one): at once for those registered so far, later
// for the others as they are registered. nil uninstalls it.
func WarnShortSecrets(report func(name string)) {
	short.mu.Lock()
	short.report = report
	var names []string
	if report != nil {
		for _, v := range short.pending {
			names = append(names, short.names[v])
		}
		short.pending = nil
	}
	short.mu.Unlock()
	for _, n := range names {
		report(n)
	}
}

// ShortSecretWarning is the text of the warning about a short secret.
func ShortSecretWarning(name string) string {
	what := "a secret value"
	if name != "" {
		what = "secret " + name
	}
	return fmt.Sprintf("%s is shorter than %d characters; redaction of short values can hide unrelated output", what, ShortSecretLen)
}
