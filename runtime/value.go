package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kilnworks/kiln/runtime/nesting"
)

// Values flowing through a run are plain JSON trees: nil, bool, string,
// json.Number, []any and map[string]any. Numbers stay json.Number so their
// text survives (1.0 stays 1.0, big integers keep every digit).

// DecodeJSON parses JSON into a value tree with json.Number numbers. It
// refuses values nested deeper than nesting.MaxDepth before decoding:
// every consumer of a value tree walks it recursively.
func DecodeJSON(data []byte) (any, error) {
	if err := nesting.JSON(data); err != nil {
		return nil, err
	}
	sd, _ := streamDecoders.Get().(*streamDecoder)
	if sd == nil {
		sd = &streamDecoder{}
		sd.dec = json.NewDecoder(&sd.src)
		sd.dec.UseNumber()
	}
	sd.src.Reset(data)
	var v any
	err := sd.dec.Decode(&v)
	if err == nil {
		// Only white space may follow, in the decoder's buffer and in
		// what it has not read. (More would let a stray ']' or '}'
		// through and leave it buffered for the next input; Token would
		// add 2 KiB to every sealed binary.)
		buffered, ok := sd.dec.Buffered().(*bytes.Reader)
		if !ok || !onlySpace(buffered) || !onlySpace(&sd.src) {
			err = fmt.Errorf("invalid JSON: trailing data after the value")
		}
	}
	sd.src.Reset(nil)
	if err != nil {
		return nil, err // a decoder that saw an error is not reused
	}
	if len(data) <= 64<<10 { // nor one whose buffer grew large
		streamDecoders.Put(sd)
	}
	return v, nil
}

// onlySpace reads r to its end and reports whether it held JSON white
// space only.
func onlySpace(r *bytes.Reader) bool {
	for {
		c, err := r.ReadByte()
		if err != nil { // io.EOF
			return true
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
}

// streamDecoder is a json.Decoder kept for the next DecodeJSON call (the
// HTTP serve path decodes a body per request). A decoder reads a stream
// of values: once a value was decoded and only white space followed it
// to the end of its input, the next input is one more value of that
// stream, read through the same buffer. The value's trailing white space, if any, stays in front
// of the next one, which JSON allows.
type streamDecoder struct {
	src bytes.Reader
	dec *json.Decoder
}

var streamDecoders sync.Pool

// EncodeJSON renders v without HTML escaping and without a trailing newline.
func EncodeJSON(v any) ([]byte, error) {
	e, b, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(b)
	e.release()
	return out, nil
}

// encodeJSON renders v into a pooled encoder's buffer; b is valid until
// e.release. Templates and logs render values on every step: a pooled
// encoder saves the encoder, its buffer and the buffer's growth each time.
func encodeJSON(v any) (e *jsonEncoder, b []byte, err error) {
	e, _ = jsonEncoders.Get().(*jsonEncoder)
	if e == nil {
		e = &jsonEncoder{}
		e.enc = json.NewEncoder(&e.buf)
		e.enc.SetEscapeHTML(false)
	}
	e.buf.Reset()
	if b, ok := appendValue(e.buf.AvailableBuffer(), v, 0); ok {
		e.buf.Write(b)
		return e, e.buf.Bytes(), nil
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		e.release()
		return nil, nil, err
	}
	return e, bytes.TrimRight(e.buf.Bytes(), "\n"), nil
}

// appendValue appends the JSON of a value tree to dst, byte for byte what
// the encoder writes (keys sorted, no HTML escaping) without its
// reflection, or reports false for anything else (other Go types, an
// invalid number, a string that needs escaping, nesting beyond 1000),
// which the encoder then renders or refuses. It is kept small: every
// sealed binary links it.
func appendValue(dst []byte, v any, depth int) ([]byte, bool) {
	if depth > 1000 {
		return dst, false // perhaps a cycle: the encoder's error
	}
	ok := true
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case string:
		return appendString(dst, x)
	case json.Number:
		if x == "" {
			x = "0"
		}
		return append(dst, x...), validNumber(string(x))
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendValue(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '{')
		var buf [8]string
		for i, k := range AppendSortedKeys(buf[:0], x) {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendString(dst, k); !ok {
				return dst, false
			}
			if dst, ok = appendValue(append(dst, ':'), x[k], depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	}
	return dst, false
}

// appendString appends s quoted, or reports false when a byte of it
// needs the encoder's care (escapes, control bytes, non-ASCII text, which
// it checks for invalid UTF-8 and U+2028/U+2029).
func appendString(dst []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return dst, false
		}
	}
	return append(append(append(dst, '"'), s...), '"'), true
}

// validNumber reports whether s is a JSON number, as the encoder checks.
func validNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	n := leadingDigits(s)
	if n == 0 || (s[0] == '0' && n > 1) {
		return false
	}
	s = s[n:]
	if strings.HasPrefix(s, ".") {
		if n = leadingDigits(s[1:]); n == 0 {
			return false
		}
		s = s[1+n:]
	}
	if len(s) > 0 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
			s = s[1:]
		}
		if n = leadingDigits(s); n == 0 {
			return false
		}
		s = s[n:]
	}
	return s == ""
}

func leadingDigits(s string) int {
	n := 0
	for n < len(s) && '0' <= s[n] && s[n] <= '9' {
		n++
	}
	return n
}

type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonEncoders sync.Pool

// release returns e to the pool, unless its buffer grew large (one big
// value must not pin its memory for the life of the process).
func (e *jsonEncoder) release() {
	if e.buf.Cap() <= 64<<10 {
		jsonEncoders.Put(e)
	}
}

// EncodeJSONIndent is EncodeJSON with two-space indentation.
func EncodeJSONIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	if o, ok := v.(*Outcome); ok && o != nil {
		// Its own encoding, indented: no encoder is built for *Outcome.
		b, err := o.MarshalJSON()
		if err == nil {
			err = json.Indent(&buf, b, "", "  ")
		}
		return buf.Bytes(), err
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Normalize converts a Go value (from TOML, from a handler) into the JSON
// value model: integers and floats become json.Number, structs and typed
// maps/slices round-trip through encoding/json.
func Normalize(v any) any {
	switch x := v.(type) {
	case nil, bool, string, json.Number:
		return x
	case int:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10))
	case uint64:
		return json.Number(strconv.FormatUint(x, 10))
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil // no JSON form
		}
		return FloatNumber(x)
	case float32:
		return Normalize(float64(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Normalize(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	out, err := DecodeJSON(data)
	if err != nil {
		return fmt.Sprint(v)
	}
	return out
}

// isNormal reports whether v already is a JSON value tree, so the engine can
// skip the copying Normalize for the common case without allocating.
func isNormal(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, json.Number:
		return true
	case []any:
		for _, e := range x {
			if !isNormal(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !isNormal(e) {
				return false
			}
		}
		return true
	}
	return false
}

// FloatNumber renders a float so that it stays a float in JSON (1 -> 1.0).
// NaN and infinities have no JSON form: callers must not pass them
// (Normalize maps them to null).
func FloatNumber(f float64) json.Number {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return json.Number("null")
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return json.Number(s)
}

// Truthy applies the workflow truthiness rule: null, false, "", 0, [] and
// {} are false; everything else is true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		return !isZeroNumber(string(x))
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// isZeroNumber reports whether the JSON number text s denotes zero, exactly
// (0, -0, 0.0, 0e5 are zero; 1e-400 is not, although it underflows a float).
func isZeroNumber(s string) bool {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	mant = strings.TrimLeft(mant, "+-")
	if mant == "" {
		return false
	}
	for _, c := range mant {
		if c != '0' && c != '.' {
			return false
		}
	}
	return true
}

// Equal reports whether two JSON values are equal: same type and same
// content, recursively. Values of different JSON types are never equal
// (1 != "1" != true). Numbers compare by exact numeric value, so 1, 1.0
// and 1e0 are equal and big integers compare digit for digit (no float64
// rounding); text that is not a number compares as text.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numberEqual(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	}
	return Equal(Normalize(a), Normalize(b))
}

func numberEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	if hugeExponent(string(a)) || hugeExponent(string(b)) {
		// An exact comparison would need a number with that many digits;
		// float64 is as good as it gets for such input.
		x, errX := a.Float64()
		y, errY := b.Float64()
		return errX == nil && errY == nil && x == y
	}
	x, okX := parseDecimal(string(a))
	y, okY := parseDecimal(string(b))
	return okX && okY && x == y
}

// decimal is a JSON number in canonical form: sign, significant digits
// without leading or trailing zeros, and the power of ten they are scaled
// by. Two numbers are equal exactly when their canonical forms are, which
// compares without float64 rounding and without math/big (which would add
// ~100 KiB to every sealed binary).
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// parseDecimal reads a JSON number (-?int(.frac)?([eE][+-]?exp)?).
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return d, false
	}
	if hasExp {
		n, err := strconv.Atoi(exp)
		if err != nil {
			return d, false
		}
		d.exp = n
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	d.exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	d.exp += len(digits) - len(trimmed)
	d.digits = trimmed
	if d.digits == "" {
		return decimal{}, true // every zero is the same zero
	}
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// hugeExponent reports whether a number's exponent is too large to expand
// exactly (big.Rat would allocate a number with that many digits).
func hugeExponent(s string) bool {
	_, exp, ok := strings.Cut(strings.ToLower(s), "e")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(strings.TrimLeft(exp, "+"))
	return err != nil || n > 1000 || n < -1000
}

// SwitchLabel is the branch label a switch node emits for v: a string is
// itself; bool and number are their JSON text (integers and floats kept
// apart: 1.0 is "1.0"); null is "null"; arrays and objects are "array" and
// "object".
func SwitchLabel(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case json.Number:
		return x.String()
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprint(v)
}

// Lookup walks a dotted path inside v: object keys, and numeric segments
// index arrays. Any miss returns (nil, false). An empty path returns v.
func Lookup(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	return lookupSegments(v, path)
}

// lookupSegments is Lookup's walk: it takes every dot-separated segment of
// path, even an empty one.
func lookupSegments(v any, path string) (any, bool) {
	cur := v
	for more := true; more; {
		// Cut, not Split: lookups run for every template marker and
		// input_from, and need no slice of segments.
		var seg string
		seg, path, more = strings.Cut(path, ".")
		var ok bool
		if cur, ok = lookupStep(cur, seg); !ok {
			return nil, false
		}
	}
	return cur, true
}

// lookupSegs is lookupSegments over a path already split (Path).
func lookupSegs(v any, segs []string) (any, bool) {
	cur := v
	for _, seg := range segs {
		var ok bool
		if cur, ok = lookupStep(cur, seg); !ok {
			return nil, false
		}
	}
	return cur, true
}

// lookupStep takes one segment of a path inside v: an object's key, or an
// array's index written as a plain decimal number.
func lookupStep(v any, seg string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		next, ok := x[seg]
		return next, ok
	case []any:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(x) || seg != strconv.Itoa(i) {
			return nil, false
		}
		return x[i], true
	}
	return nil, false
}

// TypeName names the JSON type of v for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	return AppendSortedKeys(make([]string, 0, len(m)), m)
}

// AppendSortedKeys appends the keys of m to keys, in order: an array on
// the caller's stack spares the allocation for small maps.
func AppendSortedKeys[V any](keys []string, m map[string]V) []string {
	n := len(keys)
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys[n:])
	return keys
}

// AsString renders a value for text contexts: strings as-is, everything
// else as compact JSON.
func AsString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		// What the encoder writes for a valid number (and "" as 0),
		// and what the fallback below prints for an invalid one.
		if x == "" {
			return "0"
		}
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	e, b, err := encodeJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	e.release()
	return s
}
