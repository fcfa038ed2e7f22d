package spec

import (
	"path/filepath"
	"reflect"
	"strings"
)

// SetKeys lists the TOML keys of a struct (a node, trigger, binding or
// secret) that hold a non-zero value, in declaration order: how a checker
// tells which keys an author wrote.
func SetKeys(v any) []string {
	rv := reflect.Indirect(reflect.ValueOf(v))
	var out []string
	t := rv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		if !rv.Field(i).IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// NotAllowed reports each key set in v that is neither one of keys nor
// one of common (field_not_allowed).
func NotAllowed(v any, keys []Key, common ...string) []Issue {
	allowed := map[string]bool{}
	for _, k := range keys {
		allowed[k.Name] = true
	}
	for _, k := range common {
		allowed[k] = true
	}
	var is Issues
	for _, k := range SetKeys(v) {
		if !allowed[k] {
			is.Add("field_not_allowed", "%s does not apply here", k)
		}
	}
	return is
}

// PathIssues checks the syntax of every context path key of keys that v
// sets (invalid_context_path).
func PathIssues(v any, keys []Key) []Issue {
	rv := reflect.Indirect(reflect.ValueOf(v))
	t := rv.Type()
	var is Issues
	for _, k := range keys {
		if k.Type != Path {
			continue
		}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if name != k.Name {
				continue
			}
			if p, _ := rv.Field(i).Interface().(string); p != "" && !ValidPath(p) {
				is.Add("invalid_context_path", "%s %q is not a dotted path (empty segment or surrounding space)", k.Name, p)
			}
		}
	}
	return is
}

// ValidPath reports whether p is a dotted context path: dot-separated, no
// empty segment, no surrounding space.
func ValidPath(p string) bool {
	if strings.TrimSpace(p) != p {
		return false
	}
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return false
		}
	}
	return true
}

// EnvName reports whether s is an environment variable name:
// [A-Za-z_][A-Za-z0-9_]*. Written out rather than as a regexp because
// read_env's check is linked into sealed binaries that must not link the
// regexp package (see TestRuntimeCoreStaysSmall in gen).
func EnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// PatternBase is the directory a [policy.fs] pattern covers ("" for "*").
func PatternBase(pat string) string {
	if pat == "*" {
		return ""
	}
	for _, suf := range []string{"/**", "/*", "*"} {
		if b, ok := strings.CutSuffix(pat, suf); ok {
			if b == "" {
				return "/"
			}
			return b
		}
	}
	return pat
}

// CleanAbs reports whether p is an absolute path in clean form: how a
// program is named where there is no PATH lookup.
func CleanAbs(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }
