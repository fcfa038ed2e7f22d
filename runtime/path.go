package runtime

import "strings"

// Path is a context path (a node id or `trigger`, then object keys and
// array indexes, separated by dots) compiled when a node is prepared
// (Program.Path): its node is found then and the rest split, so resolving
// it at every run parses nothing and looks no node up by name. It resolves
// exactly as the same path given to Call.Lookup does.
type Path struct {
	text string
	prog *Program // the program it was compiled for
	head int      // the node's position in prog; pathTrigger; pathNowhere
	rest []string // the segments after the head; nil for the whole value
}

const (
	pathTrigger = -1
	pathNowhere = -2 // empty, or no such node: always a miss
)

// Path compiles path for the runs of p.
func (p *Program) Path(path string) Path {
	c := Path{text: path, prog: p, head: pathNowhere}
	if path == "" {
		return c
	}
	head, rest, _ := strings.Cut(path, ".")
	if rest != "" {
		c.rest = strings.Split(rest, ".")
	}
	if head == "trigger" {
		c.head = pathTrigger
	} else if pn, ok := p.nodes[head]; ok {
		c.head = pn.pos
	}
	return c
}

// String is the path as written.
func (p Path) String() string { return p.text }

// Get resolves path as Lookup(path.String()) does.
func (c *Call) Get(path Path) (any, bool) {
	if path.text == "" {
		return nil, false
	}
	if c.Scope != nil {
		return Lookup(c.Scope, path.text)
	}
	return c.Run.resolvePath(path)
}

// GetValue is Get without the found flag, as From is Lookup's.
func (c *Call) GetValue(path Path) any {
	v, _ := c.Get(path)
	return v
}

// resolvePath is Resolve for a compiled path.
func (r *Run) resolvePath(path Path) (any, bool) {
	if path.prog != r.Program { // compiled for another program's nodes
		return r.Resolve(path.text)
	}
	switch path.head {
	case pathNowhere:
		return nil, false
	case pathTrigger:
		if !r.lazyTrigger || path.rest == nil {
			return lookupSegs(r.Trigger(), path.rest)
		}
		root, ok := r.triggerField(path.rest[0])
		if !ok {
			return nil, false
		}
		return lookupSegs(root, path.rest[1:])
	}
	r.mu.Lock()
	out := r.outputs[path.head]
	r.mu.Unlock()
	if !out.set {
		return nil, false
	}
	return lookupSegs(out.value, path.rest)
}
