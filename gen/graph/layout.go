package graph

import (
	"sort"
	"unicode/utf8"
)

// The SVG layout is a small layered (Sugiyama-style) layout, done in
// process with no external program: longest-path layers on the plain
// edges (loop edges point back up and do not pull layers), a virtual
// point on every layer a long edge crosses, barycenter ordering sweeps,
// and rows centred under each other. A node with drawn child workflows is
// a compound box holding their layouts.

const (
	fontSize   = 12.0
	lineHeight = 16.0
	charWidth  = 7.2 // average advance of the sans-serif font at fontSize
	padX       = 12.0
	padY       = 8.0
	slant      = 10.0 // extra width of parallelograms and hexagons
	gapX       = 36.0
	gapY       = 46.0 // room for an edge label between rows
	loopMargin = 56.0 // room on the right for loop edges
	clusterPad = 14.0
	maxRunes   = 48 // longer lines are cut for display (full text in the title)
	sweeps     = 8
	// maxVirtual bounds the virtual points of long edges in one cluster;
	// past it, long edges are drawn straight.
	maxVirtual = 20000
)

type point struct{ x, y float64 }

// item is one thing a cluster's layout places: a node, an entry marker or
// a virtual point of a long edge.
type item struct {
	node  *Node
	entry *Entry
	w, h  float64
	x, y  float64 // top left, relative to the cluster
	layer int
	pos   float64 // order within the layer (a float for barycenters)
	// Compound nodes: the header height and the child layouts with their
	// offsets inside the box.
	header    float64
	subs      []*clusterLayout
	subAt     []point
	subTitles []string // "calls: name (file)"
}

type route struct {
	edge  *Edge  // nil for an entry link
	entry *Entry // the entry of an entry link
	items []*item
	loop  bool // a loop edge, or an edge against the layering
	// Edges joining the same two items are spread apart: this is the
	// route's place among them and their number.
	twin, twins int
}

type clusterLayout struct {
	c      *Cluster
	w, h   float64
	title  float64 // height of the child cluster's title ("" for the top)
	items  []*item
	byNode map[*Node]*item
	routes []*route
}

// textWidth estimates the drawn width of s: wide runes count double.
func textWidth(s string) float64 {
	n := 0.0
	for _, r := range s {
		if r >= 0x1100 && (r <= 0x115f || (r >= 0x2e80 && r <= 0xa4cf) || (r >= 0xac00 && r <= 0xd7a3) ||
			(r >= 0xf900 && r <= 0xfaff) || (r >= 0xff00 && r <= 0xff60) || r >= 0x1f300) {
			n += 2
		} else {
			n++
		}
	}
	return n * charWidth
}

// shown is a line as drawn: visible, and cut to maxRunes.
func shown(s string) string {
	s = Visible(s)
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	r := []rune(s)
	return string(r[:maxRunes-1]) + "…"
}

func linesSize(lines []string) (w, h float64) {
	for _, l := range lines {
		w = max(w, textWidth(shown(l)))
	}
	return w, float64(len(lines)) * lineHeight
}

// svgNodeLines are a node's lines in the SVG: its label, then the
// children it does not draw.
func svgNodeLines(n *Node) []string {
	lines := nodeLines(n)
	for _, ch := range n.Children {
		if ch.Cluster == nil {
			lines = append(lines, "↳ "+childText(ch))
		}
	}
	return lines
}

// layoutCluster lays out c (its compound nodes first).
func layoutCluster(c *Cluster, top bool) *clusterLayout {
	l := &clusterLayout{c: c, byNode: map[*Node]*item{}}
	if !top {
		l.title = lineHeight + 4
	}
	for _, n := range c.Nodes {
		it := &item{node: n}
		tw, th := linesSize(svgNodeLines(n))
		it.w, it.h = tw+2*padX, th+2*padY
		if n.Category == Input || n.Category == Intelligence {
			it.w += 2 * slant
		}
		x, h := clusterPad, 0.0
		for _, ch := range n.Children {
			if ch.Cluster == nil {
				continue
			}
			s := layoutCluster(ch.Cluster, false)
			title := ch.Label + ": " + ch.Cluster.Label
			s.w = max(s.w, textWidth(shown(title))+2*clusterPad)
			it.subs = append(it.subs, s)
			it.subTitles = append(it.subTitles, title)
			it.subAt = append(it.subAt, point{x, it.h})
			x += s.w + clusterPad
			h = max(h, s.h)
		}
		if len(it.subs) > 0 {
			it.header = it.h
			it.w = max(it.w, x)
			it.h = it.header + h + clusterPad
		}
		l.items = append(l.items, it)
		l.byNode[n] = it
	}
	for _, e := range c.Entries {
		tw, th := linesSize(entryLines(e))
		it := &item{entry: e, w: tw + 2*padX + 8, h: th + 2*padY}
		l.items = append(l.items, it)
		if e.To != nil {
			l.routes = append(l.routes, &route{entry: e, items: []*item{it, l.byNode[e.To]}})
		}
	}
	for _, e := range c.Edges {
		l.routes = append(l.routes, &route{edge: e, items: []*item{l.byNode[e.From], l.byNode[e.To]}, loop: e.MaxIterations > 0})
	}
	l.layer()
	l.order()
	l.place()
	l.spreadTwins()
	return l
}

// spreadTwins numbers the routes that join the same two items, so their
// paths and labels do not lie on top of each other.
func (l *clusterLayout) spreadTwins() {
	type pair struct{ from, to *item }
	groups := map[pair][]*route{}
	for _, r := range l.routes {
		k := pair{r.items[0], r.items[len(r.items)-1]}
		groups[k] = append(groups[k], r)
	}
	for _, r := range l.routes {
		g := groups[pair{r.items[0], r.items[len(r.items)-1]}]
		for i, o := range g {
			if o == r {
				r.twin, r.twins = i, len(g)
			}
		}
	}
}

// layer assigns longest-path layers over the plain edges (Kahn's order;
// anything left in a cycle of plain edges goes below, its edges drawn as
// back edges), then splits long edges with virtual points.
func (l *clusterLayout) layer() {
	succ := map[*item][]*item{}
	in := map[*item]int{}
	for _, r := range l.routes {
		if r.loop {
			continue
		}
		from, to := r.items[0], r.items[1]
		succ[from] = append(succ[from], to)
		in[to]++
	}
	var queue []*item
	for _, it := range l.items {
		if in[it] == 0 {
			queue = append(queue, it)
		}
	}
	done := map[*item]bool{}
	deepest := 0
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		done[it] = true
		deepest = max(deepest, it.layer)
		for _, s := range succ[it] {
			s.layer = max(s.layer, it.layer+1)
			if in[s]--; in[s] == 0 {
				queue = append(queue, s)
			}
		}
	}
	for _, it := range l.items {
		if !done[it] {
			deepest++
			it.layer = deepest
		}
	}
	virtual := 0
	for _, r := range l.routes {
		from, to := r.items[0], r.items[1]
		if from.layer >= to.layer {
			r.loop = true // points up or sideways: drawn on the side
			continue
		}
		if r.loop || to.layer-from.layer < 2 || virtual+to.layer-from.layer > maxVirtual {
			continue
		}
		pts := []*item{from}
		for ly := from.layer + 1; ly < to.layer; ly++ {
			v := &item{layer: ly, w: 8, h: 1}
			l.items = append(l.items, v)
			pts = append(pts, v)
			virtual++
		}
		r.items = append(pts, to)
	}
}

func (l *clusterLayout) layers() [][]*item {
	var rows [][]*item
	for _, it := range l.items {
		for len(rows) <= it.layer {
			rows = append(rows, nil)
		}
		rows[it.layer] = append(rows[it.layer], it)
	}
	return rows
}

// order sorts each layer by the barycenter of its neighbours in the layer
// above, then below, a fixed number of times. Ties keep the current
// order, so the result depends on the model order only.
func (l *clusterLayout) order() {
	rows := l.layers()
	up := map[*item][]*item{}
	down := map[*item][]*item{}
	for _, r := range l.routes {
		if r.loop {
			continue
		}
		for i := 1; i < len(r.items); i++ {
			a, b := r.items[i-1], r.items[i]
			down[a] = append(down[a], b)
			up[b] = append(up[b], a)
		}
	}
	renumber := func(row []*item) {
		for i, it := range row {
			it.pos = float64(i)
		}
	}
	for _, row := range rows {
		renumber(row)
	}
	sortBy := func(row []*item, nb map[*item][]*item) {
		bary := map[*item]float64{}
		for _, it := range row {
			if len(nb[it]) == 0 {
				bary[it] = it.pos
				continue
			}
			sum := 0.0
			for _, o := range nb[it] {
				sum += o.pos
			}
			bary[it] = sum / float64(len(nb[it]))
		}
		sort.SliceStable(row, func(i, j int) bool { return bary[row[i]] < bary[row[j]] })
		renumber(row)
	}
	for s := 0; s < sweeps; s++ {
		for i := 1; i < len(rows); i++ {
			sortBy(rows[i], up)
		}
		for i := len(rows) - 2; i >= 0; i-- {
			sortBy(rows[i], down)
		}
	}
	l.items = l.items[:0]
	for _, row := range rows {
		l.items = append(l.items, row...)
	}
}

// place sets coordinates: rows top to bottom, each centred on the widest.
func (l *clusterLayout) place() {
	rows := l.layers()
	widths := make([]float64, len(rows))
	widest := 0.0
	for i, row := range rows {
		for j, it := range row {
			if j > 0 {
				widths[i] += gapX
			}
			widths[i] += it.w
		}
		widest = max(widest, widths[i])
	}
	hasLoop := false
	for _, r := range l.routes {
		hasLoop = hasLoop || r.loop
	}
	y := l.title + clusterPad
	for i, row := range rows {
		x := clusterPad + (widest-widths[i])/2
		rowH := 0.0
		for _, it := range row {
			rowH = max(rowH, it.h)
		}
		for _, it := range row {
			it.x, it.y = x, y+(rowH-it.h)/2
			x += it.w + gapX
		}
		y += rowH + gapY
	}
	l.w = widest + 2*clusterPad
	if hasLoop {
		l.w += loopMargin
	}
	l.h = y - gapY + clusterPad
	if len(rows) == 0 {
		l.h = l.title + 2*clusterPad
	}
}
