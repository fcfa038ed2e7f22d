package runtime

import "strings"

// Template is a template string split once into its literal text and its
// {{path}} markers (ParseTemplate), so a node that renders the same
// template at every run does not search it for markers every time.
//
// Rendering substitutes every marker. A path is resolved against input
// first; when it is not found there it is resolved against the whole
// execution context (node ids and `trigger`), the deliberate extension
// over the reference runtime. A marker that resolves nowhere is left in
// the output verbatim so the author notices the miss. Strings are inserted
// as-is; other values as compact JSON. Markers of the form {{secret:NAME}}
// are never touched here: they belong to header handling.
type Template struct {
	parts []templatePart
	tail  string // the text after the last marker
	size  int    // the length of the literal text, markers left out
}

// templatePart is the literal text before a marker, and the marker.
type templatePart struct {
	text   string
	marker string // as written, braces included: what a miss leaves
	path   string // "" for a marker left as written (empty, or secret:)
	// inContext is path compiled for the run's context (Program.Template);
	// from ParseTemplate, it resolves by name.
	inContext Path
}

// ParseTemplate splits tmpl into literal text and markers. A "{{" with no
// "}}" after it is literal text, as is everything after it.
func ParseTemplate(tmpl string) *Template {
	t := &Template{}
	rest := tmpl
	for {
		open := strings.Index(rest, "{{")
		if open < 0 {
			break
		}
		closeAt := strings.Index(rest[open+2:], "}}")
		if closeAt < 0 {
			break
		}
		p := templatePart{text: rest[:open], marker: rest[open : open+2+closeAt+2]}
		if path := strings.TrimSpace(rest[open+2 : open+2+closeAt]); path != "" && !strings.HasPrefix(path, "secret:") {
			p.path, p.inContext = path, Path{text: path}
		}
		t.parts = append(t.parts, p)
		t.size += len(p.text)
		rest = rest[open+len(p.marker):]
	}
	t.tail = rest
	t.size += len(rest)
	return t
}

// Template is ParseTemplate with each marker's path compiled for the runs
// of p (Program.Path), for a node to prepare once.
func (p *Program) Template(tmpl string) *Template {
	t := ParseTemplate(tmpl)
	for i := range t.parts {
		if part := &t.parts[i]; part.path != "" {
			part.inContext = p.Path(part.path)
		}
	}
	return t
}

// Render renders t against input and the run's context (run nil: input
// alone).
func (t *Template) Render(input any, run *Run) string {
	if len(t.parts) == 0 {
		return t.tail
	}
	var b strings.Builder
	b.Grow(t.size + 16) // most renders fit: one allocation instead of several
	for _, p := range t.parts {
		b.WriteString(p.text)
		b.WriteString(markerValue(p, input, run))
	}
	b.WriteString(t.tail)
	return b.String()
}

// markerValue is what replaces the marker of p.
func markerValue(p templatePart, input any, run *Run) string {
	if p.path == "" {
		return p.marker
	}
	if v, ok := Lookup(input, p.path); ok && input != nil {
		return AsString(v)
	}
	if run != nil {
		if v, ok := run.resolvePath(p.inContext); ok {
			return AsString(v)
		}
	}
	return p.marker
}

// Render renders tmpl once (ParseTemplate, then Template.Render).
func Render(tmpl string, input any, run *Run) string {
	return ParseTemplate(tmpl).Render(input, run)
}
