package graph

import (
	"fmt"
	"strings"
)

// DOT shapes by category.
var dotShape = map[Category]string{
	Input:        `shape=parallelogram, fillcolor="#e8f1fb", color="#3a6ea5"`,
	Transform:    `shape=box, style="rounded,filled", fillcolor="#eef7ee", color="#4a8a4a"`,
	Intelligence: `shape=hexagon, fillcolor="#f4ecfa", color="#7a4fa0"`,
	Action:       `shape=box, fillcolor="#fdf1e4", color="#b8732e"`,
	Control:      `shape=diamond, fillcolor="#f2f2f2", color="#555555"`,
}

// DOT renders the graph for Graphviz (`dot -Tsvg`). Node identifiers are
// generated (n0, n1, ...); user text appears only in quoted, escaped
// strings.
func (g *Graph) DOT() string {
	d := &dotWriter{}
	d.line(0, `digraph "`+dotText(g.Name)+`" {`)
	d.line(1, `graph [rankdir=TB, compound=true, fontname="Helvetica", fontsize=12, label="`+dotText(g.Name)+`", labelloc=t];`)
	d.line(1, `node [fontname="Helvetica", fontsize=11, style=filled];`)
	d.line(1, `edge [fontname="Helvetica", fontsize=10];`)
	for _, e := range g.Root.Entries {
		d.line(1, fmt.Sprintf(`e%d [label="%s", shape=oval, style="dashed", class="entry"];`, e.num, dotLines(entryLines(e))))
	}
	d.cluster(g.Root, 1)
	for _, e := range g.Root.Entries {
		if e.To != nil {
			d.line(1, fmt.Sprintf(`e%d -> n%d;`, e.num, e.To.num))
		}
	}
	d.line(0, "}")
	return d.b.String()
}

type dotWriter struct{ b strings.Builder }

func (d *dotWriter) line(indent int, s string) {
	d.b.WriteString(strings.Repeat("  ", indent))
	d.b.WriteString(s)
	d.b.WriteByte('\n')
}

func (d *dotWriter) cluster(c *Cluster, indent int) {
	for _, n := range c.Nodes {
		attrs := dotShape[n.Category]
		class := string(n.Category)
		if n.DeadEnd != "" {
			attrs += `, penwidth=2, color="#c62828"`
			class += " deadend"
		}
		if n.Visited {
			attrs += `, penwidth=3, color="#1565c0"`
			class += " visited"
		}
		if n.Failed {
			attrs += `, fillcolor="#fde0e0", color="#c62828"`
			class += " failed"
		}
		tip := ""
		if n.DeadEnd != "" {
			tip = fmt.Sprintf(`, tooltip="can dead-end: %s"`, dotText(n.DeadEnd))
		}
		d.line(indent, fmt.Sprintf(`n%d [label="%s", %s, class="%s"%s];`, n.num, dotLines(nodeLines(n)), attrs, class, tip))
	}
	for _, n := range c.Nodes {
		for i, ch := range n.Children {
			if ch.Cluster == nil {
				d.line(indent, fmt.Sprintf(`n%d_c%d [label="%s", shape=component, style=dashed, class="child"];`, n.num, i, dotText(childText(ch))))
				continue
			}
			d.line(indent, fmt.Sprintf(`subgraph cluster_c%d {`, ch.Cluster.num))
			d.line(indent+1, fmt.Sprintf(`label="%s"; style=dashed; color="#888888";`, dotText(ch.Cluster.Label)))
			d.cluster(ch.Cluster, indent+1)
			d.line(indent, "}")
		}
	}
	for _, e := range c.Edges {
		var attrs []string
		if label := edgeLabel(e); label != "" {
			attrs = append(attrs, `label="`+dotText(label)+`"`)
		}
		if e.MaxIterations > 0 {
			// A loop edge points back up: it must not pull ranks.
			attrs = append(attrs, `style=dashed`, `color="#8e24aa"`, `constraint=false`)
		}
		if e.Taken {
			attrs = append(attrs, `penwidth=3`, `color="#1565c0"`)
		}
		d.line(indent, fmt.Sprintf("n%d -> n%d%s;", e.From.num, e.To.num, dotAttrs(attrs)))
	}
	for _, n := range c.Nodes {
		for i, ch := range n.Children {
			attrs := []string{`label="` + dotText(ch.Label) + `"`, `style=dotted`, `arrowhead=odot`}
			to := fmt.Sprintf("n%d_c%d", n.num, i)
			if ch.Cluster != nil {
				if ch.Entry == nil {
					continue // a drawn child without a known entry: the cluster stands alone
				}
				to = fmt.Sprintf("n%d", ch.Entry.num)
				attrs = append(attrs, fmt.Sprintf("lhead=cluster_c%d", ch.Cluster.num))
			}
			d.line(indent, fmt.Sprintf("n%d -> %s%s;", n.num, to, dotAttrs(attrs)))
		}
	}
}

func dotAttrs(attrs []string) string {
	if len(attrs) == 0 {
		return ""
	}
	return " [" + strings.Join(attrs, ", ") + "]"
}

// dotLines joins escaped lines with DOT's centred line break.
func dotLines(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = dotText(l)
	}
	return strings.Join(out, `\n`)
}
