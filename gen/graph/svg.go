package graph

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
)

// SVG renders the graph as a standalone SVG document, laid out in process
// (layout.go). Every node is one <g class="node ..."> with id
// NodeElementID(key) and data-node its id; every edge one <g class="edge
// ..."> with id EdgeElementID(from, to) (a suffix -2, -3 when several
// edges join the same nodes); entry markers and their links are
// class="entry" and "entry-link"; a drawn child workflow is a <g
// class="cluster"> inside its node's group. All user text is
// XML-escaped. The error is for renderers to come; today SVG always
// succeeds.
func (g *Graph) SVG() ([]byte, error) {
	root := layoutCluster(g.Root, true)
	s := &svgWriter{ids: map[string]int{}}
	titleH := lineHeight + 8
	w, h := max(root.w, textWidth(shown(g.Name))+2*clusterPad), root.h+titleH
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" class="kiln-graph" width="%s" height="%s" viewBox="0 0 %s %s" font-family="Helvetica, Arial, sans-serif" font-size="%s">`+"\n",
		num(w), num(h), num(w), num(h), num(fontSize))
	s.b.WriteString(svgStyle)
	fmt.Fprintf(&s.b, `<title>%s</title>`+"\n", esc(Visible(g.Name)))
	fmt.Fprintf(&s.b, `<text class="graph-title" x="%s" y="%s">%s</text>`+"\n", num(clusterPad), num(lineHeight+2), esc(shown(g.Name)))
	s.cluster(root, point{0, titleH})
	s.b.WriteString("</svg>\n")
	return s.b.Bytes(), nil
}

// svgStyle is scoped to the drawing (.kiln-graph), so a page that
// embeds the SVG inline keeps its own styles, and the drawing its own.
const svgStyle = `<defs>
<marker id="kiln-graph-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker>
</defs>
<style>
.kiln-graph .node>.box{stroke-width:1.2}
.kiln-graph .input>.box{fill:#e8f1fb;stroke:#3a6ea5}
.kiln-graph .transform>.box{fill:#eef7ee;stroke:#4a8a4a}
.kiln-graph .intelligence>.box{fill:#f4ecfa;stroke:#7a4fa0}
.kiln-graph .action>.box{fill:#fdf1e4;stroke:#b8732e}
.kiln-graph .control>.box{fill:#f2f2f2;stroke:#555}
.kiln-graph .deadend>.box{stroke:#c62828;stroke-width:2;stroke-dasharray:5 3}
.kiln-graph .visited>.box{stroke:#1565c0;stroke-width:3}
.kiln-graph .failed>.box{fill:#fde0e0;stroke:#c62828;stroke-width:3}
.kiln-graph .entry>.box{fill:#fff;stroke:#333;stroke-dasharray:2 2}
.kiln-graph .cluster>.frame{fill:none;stroke:#888;stroke-dasharray:4 3}
.kiln-graph .edge>path,.kiln-graph .entry-link>path{fill:none;stroke:#555;stroke-width:1.2;marker-end:url(#kiln-graph-arrow)}
.kiln-graph .edge.loop>path{stroke:#8e24aa;stroke-dasharray:6 4}
.kiln-graph .edge.taken>path{stroke:#1565c0;stroke-width:3}
.kiln-graph text{fill:#222}
.kiln-graph .label{font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}
.kiln-graph .kind{fill:#555}
</style>
`

type svgWriter struct {
	b   bytes.Buffer
	ids map[string]int // element ids used, for the -2, -3 suffixes
}

// num formats a coordinate with at most one decimal, deterministically.
func num(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// unique returns id, or id-2, id-3 ... when already used.
func (s *svgWriter) unique(id string) string {
	s.ids[id]++
	if n := s.ids[id]; n > 1 {
		return fmt.Sprintf("%s-%d", id, n)
	}
	return id
}

func (s *svgWriter) cluster(l *clusterLayout, at point) {
	// Edges first, so boxes are drawn over their ends.
	for _, r := range l.routes {
		s.route(l, r, at)
	}
	for _, it := range l.items {
		switch {
		case it.node != nil:
			s.node(it, at)
		case it.entry != nil:
			s.entry(it, at)
		}
	}
}

func (s *svgWriter) node(it *item, at point) {
	n := it.node
	x, y := at.x+it.x, at.y+it.y
	classes := "node " + string(n.Category)
	if n.DeadEnd != "" {
		classes += " deadend"
	}
	if n.Visited {
		classes += " visited"
	}
	if n.Failed {
		classes += " failed"
	}
	fmt.Fprintf(&s.b, `<g id="%s" class="%s" data-node="%s" data-kind="%s">`, esc(s.unique(NodeElementID(n.Key))), classes, esc(Visible(n.ID)), esc(Visible(n.Kind)))
	title := n.ID + " (" + n.Kind + ")"
	if n.DeadEnd != "" {
		title += ": can dead-end: " + n.DeadEnd
	}
	fmt.Fprintf(&s.b, "<title>%s</title>", esc(Visible(title)))
	s.b.WriteString(shape(n.Category, x, y, it.w, it.h))
	s.lines(svgNodeLines(n), x+it.w/2, y+padY, 1)
	for i, sub := range it.subs {
		p := point{x + it.subAt[i].x, y + it.subAt[i].y}
		fmt.Fprintf(&s.b, `<g class="cluster" data-label="%s">`, esc(Visible(sub.c.Label)))
		fmt.Fprintf(&s.b, `<rect class="frame" x="%s" y="%s" width="%s" height="%s" rx="4"/>`, num(p.x), num(p.y), num(sub.w), num(sub.h))
		fmt.Fprintf(&s.b, `<text x="%s" y="%s">%s</text>`, num(p.x+clusterPad/2), num(p.y+lineHeight), esc(shown(it.subTitles[i])))
		s.b.WriteString("\n")
		s.cluster(sub, p)
		s.b.WriteString("</g>")
	}
	s.b.WriteString("</g>\n")
}

// lines writes centred text lines; the line at kindLine is the kind.
func (s *svgWriter) lines(lines []string, cx, top float64, kindLine int) {
	for i, l := range lines {
		class := ""
		if i == kindLine {
			class = ` class="kind"`
		}
		fmt.Fprintf(&s.b, `<text%s x="%s" y="%s" text-anchor="middle">%s</text>`, class, num(cx), num(top+float64(i+1)*lineHeight-4), esc(shown(l)))
	}
}

func (s *svgWriter) entry(it *item, at point) {
	e := it.entry
	x, y := at.x+it.x, at.y+it.y
	fmt.Fprintf(&s.b, `<g id="%s" class="entry" data-start="%s"><title>%s</title>`, esc(s.unique("entry-"+elementKey(e.Key))), esc(Visible(e.Name)), esc(Visible(strings.Join(entryLines(e), "; "))))
	fmt.Fprintf(&s.b, `<rect class="box" x="%s" y="%s" width="%s" height="%s" rx="%s"/>`, num(x), num(y), num(it.w), num(it.h), num(min(it.h/2, 14)))
	s.lines(entryLines(e), x+it.w/2, y+padY, -1)
	s.b.WriteString("</g>\n")
}

// shape is a node's box by category.
func shape(c Category, x, y, w, h float64) string {
	poly := func(pts ...float64) string {
		var b strings.Builder
		b.WriteString(`<polygon class="box" points="`)
		for i := 0; i < len(pts); i += 2 {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(num(pts[i]) + "," + num(pts[i+1]))
		}
		b.WriteString(`"/>`)
		return b.String()
	}
	switch c {
	case Input: // parallelogram
		return poly(x+slant, y, x+w, y, x+w-slant, y+h, x, y+h)
	case Intelligence: // hexagon
		return poly(x+slant, y, x+w-slant, y, x+w, y+h/2, x+w-slant, y+h, x+slant, y+h, x, y+h/2)
	case Control: // octagon: cut corners
		k := min(8, h/4)
		return poly(x+k, y, x+w-k, y, x+w, y+k, x+w, y+h-k, x+w-k, y+h, x+k, y+h, x, y+h-k, x, y+k)
	case Transform:
		return fmt.Sprintf(`<rect class="box" x="%s" y="%s" width="%s" height="%s" rx="10"/>`, num(x), num(y), num(w), num(h))
	}
	return fmt.Sprintf(`<rect class="box" x="%s" y="%s" width="%s" height="%s"/>`, num(x), num(y), num(w), num(h))
}

// route draws one edge: through its virtual points from the bottom of
// its source to the top of its target, or, for a loop edge, round the
// right-hand side.
func (s *svgWriter) route(l *clusterLayout, r *route, at point) {
	from, to := r.items[0], r.items[len(r.items)-1]
	var d string
	var labelAt point
	// Twins (edges joining the same two boxes) are spread apart.
	spread := float64(r.twin) - float64(r.twins-1)/2
	if r.loop {
		sx, sy := at.x+from.x+from.w, at.y+from.y+from.h/2+spread*8
		tx, ty := at.x+to.x+to.w, at.y+to.y+to.h/2+spread*8
		bend := at.x + l.w - loopMargin/2 + spread*12
		d = fmt.Sprintf("M%s,%s C%s,%s %s,%s %s,%s", num(sx), num(sy), num(bend), num(sy), num(bend), num(ty), num(tx), num(ty))
		labelAt = point{(sx + tx + 2*bend) / 4, (sy + ty) / 2}
	} else {
		dx := spread * min(16, from.w/(float64(r.twins)+1), to.w/(float64(r.twins)+1))
		pts := []point{{at.x + from.x + from.w/2 + dx, at.y + from.y + from.h}}
		for _, v := range r.items[1 : len(r.items)-1] {
			pts = append(pts, point{at.x + v.x + v.w/2 + dx, at.y + v.y})
		}
		pts = append(pts, point{at.x + to.x + to.w/2 + dx, at.y + to.y})
		var b strings.Builder
		for i, p := range pts {
			if i == 0 {
				b.WriteString("M")
			} else {
				b.WriteString(" L")
			}
			b.WriteString(num(p.x) + "," + num(p.y))
		}
		d = b.String()
		labelAt = point{(pts[0].x + pts[1].x) / 2, (pts[0].y+pts[1].y)/2 + 4 + spread*12}
	}
	if r.edge == nil {
		e := r.entry
		fmt.Fprintf(&s.b, `<g class="entry-link" data-start="%s"><path d="%s"/></g>`+"\n", esc(Visible(e.Name)), d)
		return
	}
	e := r.edge
	classes := "edge"
	if e.MaxIterations > 0 {
		classes += " loop"
	}
	if e.Taken {
		classes += " taken"
	}
	label := edgeLabel(e)
	title := e.From.ID + " → " + e.To.ID
	if label != "" {
		title += " (" + label + ")"
	}
	fmt.Fprintf(&s.b, `<g id="%s" class="%s" data-from="%s" data-to="%s" data-when="%s"><title>%s</title><path d="%s"/>`,
		esc(s.unique(EdgeElementID(e.From.Key, e.To.Key))), classes, esc(Visible(e.From.ID)), esc(Visible(e.To.ID)), esc(Visible(e.When)), esc(Visible(title)), d)
	if label != "" {
		fmt.Fprintf(&s.b, `<text class="label" x="%s" y="%s" text-anchor="middle">%s</text>`, num(labelAt.x), num(labelAt.y), esc(shown(label)))
	}
	s.b.WriteString("</g>\n")
}
