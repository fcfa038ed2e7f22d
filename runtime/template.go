package runtime

import "strings"

// Render substitutes every {{path}} marker in tmpl. A path is resolved
// against input first; when it is not found there it is resolved against
// the whole execution context (node ids and `trigger`), the deliberate
// extension over the reference runtime. A marker that resolves nowhere is
// left in the output verbatim so the author notices the miss. Strings are
// inserted as-is; other values as compact JSON. Markers of the form
// {{secret:NAME}} are never touched here: they belong to header handling.
func Render(tmpl string, input any, run *Run) string {
	if !strings.Contains(tmpl, "{{") {
		return tmpl
	}
	var b strings.Builder
	b.Grow(len(tmpl) + 16) // most renders fit: one allocation instead of several
	rest := tmpl
	for {
		open := strings.Index(rest, "{{")
		if open < 0 {
			b.WriteString(rest)
			break
		}
		closeAt := strings.Index(rest[open+2:], "}}")
		if closeAt < 0 {
			b.WriteString(rest)
			break
		}
		marker := rest[open : open+2+closeAt+2]
		path := strings.TrimSpace(rest[open+2 : open+2+closeAt])
		b.WriteString(rest[:open])
		rest = rest[open+len(marker):]
		if path == "" || strings.HasPrefix(path, "secret:") {
			b.WriteString(marker)
			continue
		}
		if v, ok := Lookup(input, path); ok && input != nil {
			b.WriteString(AsString(v))
			continue
		}
		if run != nil {
			if v, ok := run.Resolve(path); ok {
				b.WriteString(AsString(v))
				continue
			}
		}
		b.WriteString(marker)
	}
	return b.String()
}
