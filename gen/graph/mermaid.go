package graph

import (
	"fmt"
	"strings"
)

// Mermaid shapes by category: [open, close] around the quoted label.
var mermaidShape = map[Category][2]string{
	Input:        {"[/", "/]"}, // parallelogram
	Transform:    {"(", ")"},   // rounded box
	Intelligence: {"{{", "}}"}, // hexagon
	Action:       {"[", "]"},   // box
	Control:      {"{", "}"},   // rhombus
}

// mermaidStyle is the style of each class: one per category and per
// mark. Only the classes a drawing uses are defined in it.
var mermaidStyle = map[string]string{
	string(Input):        "fill:#e8f1fb,stroke:#3a6ea5",
	string(Transform):    "fill:#eef7ee,stroke:#4a8a4a",
	string(Intelligence): "fill:#f4ecfa,stroke:#7a4fa0",
	string(Action):       "fill:#fdf1e4,stroke:#b8732e",
	string(Control):      "fill:#f2f2f2,stroke:#555",
	"entry":              "fill:#fff,stroke:#333,stroke-dasharray:2 2",
	"child":              "fill:#fff,stroke:#888,stroke-dasharray:4 3",
	"deadend":            "stroke:#c62828,stroke-width:2px,stroke-dasharray:5 3",
	"visited":            "stroke:#1565c0,stroke-width:3px",
	"failed":             "fill:#fde0e0,stroke:#c62828,stroke-width:3px",
}

// Mermaid renders the graph as a Mermaid flowchart (the format code hosts
// render in Markdown). Identifiers are generated (n0, n1, ...); user text
// appears only inside quoted, escaped labels.
func (g *Graph) Mermaid() string {
	m := &mermaidWriter{}
	m.line(0, "%% workflow "+mermaidComment(g.Name)+" (kiln graph)")
	m.line(0, "flowchart TD")
	for _, e := range g.Root.Entries {
		m.line(1, fmt.Sprintf(`e%d(["%s"])`, e.num, mermaidLines(entryLines(e))))
		m.class("entry", fmt.Sprintf("e%d", e.num))
	}
	m.cluster(g.Root, 1)
	for _, e := range g.Root.Entries {
		if e.To != nil {
			m.link(1, fmt.Sprintf("e%d --> n%d", e.num, e.To.num), false)
		}
	}
	for _, class := range mermaidClassOrder {
		if len(m.classes[class]) > 0 {
			m.line(1, "classDef "+class+" "+mermaidStyle[class])
		}
	}
	for _, class := range mermaidClassOrder {
		if ids := m.classes[class]; len(ids) > 0 {
			m.line(1, "class "+strings.Join(ids, ",")+" "+class)
		}
	}
	if len(m.taken) > 0 {
		m.line(1, "linkStyle "+strings.Join(m.taken, ",")+" stroke:#1565c0,stroke-width:3px")
	}
	return m.b.String()
}

// mermaidClassOrder is the order class statements are written in: a
// later class wins where two set the same style.
var mermaidClassOrder = []string{"entry", "child", string(Input), string(Transform), string(Intelligence),
	string(Action), string(Control), "deadend", "visited", "failed"}

type mermaidWriter struct {
	b       strings.Builder
	classes map[string][]string // class name to the identifiers it styles
	links   int                 // links written so far: linkStyle counts them
	taken   []string            // link numbers of taken edges
}

func (m *mermaidWriter) line(indent int, s string) {
	m.b.WriteString(strings.Repeat("  ", indent))
	m.b.WriteString(s)
	m.b.WriteByte('\n')
}

func (m *mermaidWriter) class(name, id string) {
	if m.classes == nil {
		m.classes = map[string][]string{}
	}
	m.classes[name] = append(m.classes[name], id)
}

func (m *mermaidWriter) link(indent int, s string, taken bool) {
	if taken {
		m.taken = append(m.taken, fmt.Sprint(m.links))
	}
	m.links++
	m.line(indent, s)
}

func (m *mermaidWriter) cluster(c *Cluster, indent int) {
	for _, n := range c.Nodes {
		shape := mermaidShape[n.Category]
		id := fmt.Sprintf("n%d", n.num)
		m.line(indent, fmt.Sprintf(`%s%s"%s"%s`, id, shape[0], mermaidLines(nodeLines(n)), shape[1]))
		m.class(string(n.Category), id)
		if n.DeadEnd != "" {
			m.class("deadend", id)
		}
		if n.Visited {
			m.class("visited", id)
		}
		if n.Failed {
			m.class("failed", id)
		}
	}
	for _, n := range c.Nodes {
		for i, ch := range n.Children {
			if ch.Cluster == nil {
				id := fmt.Sprintf("n%d_c%d", n.num, i)
				m.line(indent, fmt.Sprintf(`%s[["%s"]]`, id, mermaidText(childText(ch))))
				m.class("child", id)
				continue
			}
			m.line(indent, fmt.Sprintf(`subgraph c%d["%s"]`, ch.Cluster.num, mermaidText(ch.Cluster.Label)))
			m.cluster(ch.Cluster, indent+1)
			m.line(indent, "end")
		}
	}
	for _, e := range c.Edges {
		arrow := "-->"
		if e.MaxIterations > 0 {
			arrow = "-.->"
		}
		label := edgeLabel(e)
		if label != "" {
			arrow += `|"` + mermaidText(label) + `"|`
		}
		m.link(indent, fmt.Sprintf("n%d %s n%d", e.From.num, arrow, e.To.num), e.Taken)
	}
	for _, n := range c.Nodes {
		for i, ch := range n.Children {
			to := fmt.Sprintf("n%d_c%d", n.num, i)
			switch {
			case ch.Entry != nil:
				to = fmt.Sprintf("n%d", ch.Entry.num)
			case ch.Cluster != nil:
				to = fmt.Sprintf("c%d", ch.Cluster.num)
			}
			m.link(indent, fmt.Sprintf(`n%d -.-o|"%s"| %s`, n.num, mermaidText(ch.Label), to), false)
		}
	}
}

// mermaidLines joins escaped lines with Mermaid's line break.
func mermaidLines(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = mermaidText(l)
	}
	return strings.Join(out, "<br/>")
}

// mermaidComment keeps a name on its comment line.
func mermaidComment(s string) string { return fmt.Sprintf("%q", Visible(s)) }

// entryLines is the text of an entry marker: the start node and its
// sources.
func entryLines(e *Entry) []string {
	var lines []string
	if e.Name != "" {
		lines = append(lines, "start "+e.Name)
	} else {
		lines = append(lines, "start")
	}
	return append(lines, e.Lines...)
}
