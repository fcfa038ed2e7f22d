package data

import (
	"strconv"

	"github.com/kilnworks/kiln/runtime"
)

// Diff is the structural JSON diff of diff_compute:
//
//	{"added": {path: new}, "removed": {path: old},
//	 "changed": {path: {"from": old, "to": new}}, "unchanged": bool}
//
// Objects recurse by key and paths use dots (config.timeout); arrays diff
// by index and paths use brackets (items[2].name); extra indices are added
// or removed. Anything else is a leaf compared with runtime.Equal: values of
// different JSON types always differ (1 != "1" != true), while numbers
// compare by numeric value, so 1 and 1.0 are the same number and big
// integers compare exactly. Two roots that differ as leaves are reported
// under the empty path "".
func Diff(left, right any) map[string]any {
	d := differ{added: map[string]any{}, removed: map[string]any{}, changed: map[string]any{}}
	d.walk("", left, right)
	return map[string]any{
		"added":     d.added,
		"removed":   d.removed,
		"changed":   d.changed,
		"unchanged": len(d.added) == 0 && len(d.removed) == 0 && len(d.changed) == 0,
	}
}

type differ struct {
	added, removed, changed map[string]any
}

func key(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// sameLeaf reports whether left and right are equal leaves, for which
// walk records nothing: their path need not be built.
func sameLeaf(left, right any) bool {
	switch left.(type) {
	case map[string]any, []any:
		return false
	}
	return runtime.Equal(left, right)
}

func (d *differ) walk(path string, left, right any) {
	var buf [8]string // the keys of a small object, without allocating
	switch l := left.(type) {
	case map[string]any:
		if r, ok := right.(map[string]any); ok {
			for _, k := range runtime.AppendSortedKeys(buf[:0], l) {
				if rv, ok := r[k]; !ok {
					d.removed[key(path, k)] = l[k]
				} else if !sameLeaf(l[k], rv) {
					d.walk(key(path, k), l[k], rv)
				}
			}
			for _, k := range runtime.AppendSortedKeys(buf[:0], r) {
				if _, ok := l[k]; !ok {
					d.added[key(path, k)] = r[k]
				}
			}
			return
		}
	case []any:
		if r, ok := right.([]any); ok {
			for i := 0; i < len(l) || i < len(r); i++ {
				switch {
				case i >= len(r):
					d.removed[index(path, i)] = l[i]
				case i >= len(l):
					d.added[index(path, i)] = r[i]
				case !sameLeaf(l[i], r[i]):
					d.walk(index(path, i), l[i], r[i])
				}
			}
			return
		}
	}
	if !runtime.Equal(left, right) {
		d.changed[path] = map[string]any{"from": left, "to": right}
	}
}
