package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values flowing through a run are plain JSON trees: nil, bool, string,
// json.Number, []any and map[string]any. Numbers stay json.Number so their
// text survives (1.0 stays 1.0, big integers keep every digit).

// DecodeJSON parses JSON into a value tree with json.Number numbers.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid JSON: trailing data after the value")
	}
	return v, nil
}

// EncodeJSON renders v without HTML escaping and without a trailing newline.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// EncodeJSONIndent is EncodeJSON with two-space indentation.
func EncodeJSONIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
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
		return FloatNumber(x)
	case float32:
		return FloatNumber(float64(x))
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

// FloatNumber renders a float so that it stays a float in JSON (1 -> 1.0).
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
		f, err := x.Float64()
		return err != nil || f != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
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
	cur := v
	for _, seg := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) || seg != strconv.Itoa(i) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// AsString renders a value for text contexts: strings as-is, everything
// else as compact JSON.
func AsString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := EncodeJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
