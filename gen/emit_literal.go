package gen

import (
	"fmt"
	"math"
	"reflect"
	"sort"

	"github.com/dave/jennifer/jen"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The workflow tree becomes Go composite literals of runtime/workflow
// types. The literal writer is driven by reflection over the model, so a
// field added to the model is emitted without touching the generator, and
// a field of a shape it cannot write is an error rather than a silent
// omission. Zero values are left out (they are what the literal would
// hold anyway); maps are written in sorted key order.

const workflowPkg = "github.com/kilnworks/kiln/runtime/workflow"

// multi renders a brace list one element per line with trailing commas,
// keeping the order given (jen.Dict would sort struct fields by name).
var multi = jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}

// literalWriter writes one workflow tree.
type literalWriter struct {
	// childVar names the package variable holding each child workflow.
	childVar map[*workflow.Workflow]string
	// assetCall returns the expression reading an embedded asset of wf.
	assetCall func(wf *workflow.Workflow, declared string) (jen.Code, error)
}

var (
	workflowType   = reflect.TypeFor[workflow.Workflow]()
	pointerHelpers = map[reflect.Kind]string{
		reflect.Int:     "Int",
		reflect.Bool:    "Bool",
		reflect.String:  "String",
		reflect.Float64: "Float64",
	}
)

// workflowLit is the literal &workflow.Workflow{...} of w. Source is left
// out (a compiled-in workflow has no file), Children refer to the child
// variables and Assets read the embedded files.
func (lw *literalWriter) workflowLit(w *workflow.Workflow) (jen.Code, error) {
	v := reflect.ValueOf(w).Elem()
	var items []jen.Code
	for i := range workflowType.NumField() {
		f := workflowType.Field(i)
		fv := v.Field(i)
		if fv.IsZero() {
			continue
		}
		var code jen.Code
		var err error
		switch f.Name {
		case "Source":
			continue
		case "Children":
			code, err = lw.childrenLit(w)
		case "Assets":
			code, err = lw.assetsLit(w)
		default:
			code, err = lw.value(fv, false, "workflow."+f.Name)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, jen.Id(f.Name).Op(":").Add(code))
	}
	return jen.Op("&").Qual(workflowPkg, "Workflow").Custom(multi, items...), nil
}

func (lw *literalWriter) childrenLit(w *workflow.Workflow) (jen.Code, error) {
	var items []jen.Code
	for _, p := range runtime.SortedKeys(w.Children) {
		name, ok := lw.childVar[w.Children[p]]
		if !ok {
			return nil, fmt.Errorf("child workflow %s of %q was not planned", p, w.Name)
		}
		items = append(items, jen.Lit(p).Op(":").Id(name))
	}
	return jen.Map(jen.String()).Op("*").Qual(workflowPkg, "Workflow").Custom(multi, items...), nil
}

func (lw *literalWriter) assetsLit(w *workflow.Workflow) (jen.Code, error) {
	var items []jen.Code
	for _, p := range runtime.SortedKeys(w.Assets) {
		call, err := lw.assetCall(w, p)
		if err != nil {
			return nil, err
		}
		items = append(items, jen.Lit(p).Op(":").Add(call))
	}
	return jen.Map(jen.String()).Index().Byte().Custom(multi, items...), nil
}

// value writes v (not zero). elide drops the type of a struct literal
// where Go infers it (slice elements, map values). where names the field
// for error messages.
func (lw *literalWriter) value(v reflect.Value, elide bool, where string) (jen.Code, error) {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		e := t.Elem()
		if e.Kind() == reflect.Struct {
			if e == workflowType {
				return nil, fmt.Errorf("%s: nested workflow outside Children", where)
			}
			lit, err := lw.structLit(v.Elem(), false, where)
			if err != nil {
				return nil, err
			}
			return jen.Op("&").Add(lit), nil
		}
		helper, ok := pointerHelpers[e.Kind()]
		if !ok || e.PkgPath() != "" {
			return nil, fmt.Errorf("%s: cannot emit a pointer to %s", where, e)
		}
		inner, err := lw.value(v.Elem(), false, where)
		if err != nil {
			return nil, err
		}
		return jen.Qual(workflowPkg, helper).Call(inner), nil
	case reflect.Struct:
		return lw.structLit(v, elide, where)
	case reflect.Slice:
		typ, err := typeCode(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		var items []jen.Code
		for i := range v.Len() {
			c, err := lw.value(v.Index(i), true, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return nil, err
			}
			items = append(items, c)
		}
		if t.Elem().Kind() == reflect.Struct {
			return jen.Add(typ).Custom(multi, items...), nil
		}
		return jen.Add(typ).Values(items...), nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: cannot emit a map keyed by %s", where, t.Key())
		}
		typ, err := typeCode(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		var items []jen.Code
		for _, k := range keys {
			c, err := lw.value(v.MapIndex(reflect.ValueOf(k).Convert(t.Key())), true, where+"."+k)
			if err != nil {
				return nil, err
			}
			items = append(items, jen.Lit(k).Op(":").Add(c))
		}
		return jen.Add(typ).Custom(multi, items...), nil
	case reflect.String:
		return jen.Lit(v.String()), nil
	case reflect.Bool:
		return jen.Lit(v.Bool()), nil
	case reflect.Int, reflect.Int64, reflect.Int32:
		return jen.Lit(int(v.Int())), nil
	case reflect.Float64:
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%s: %v is not a finite number", where, f)
		}
		return jen.Lit(f), nil
	}
	return nil, fmt.Errorf("%s: cannot emit a value of type %s", where, t)
}

// structLit writes a struct literal of a runtime/workflow type, fields in
// declaration order, zero fields left out.
func (lw *literalWriter) structLit(v reflect.Value, elide bool, where string) (jen.Code, error) {
	t := v.Type()
	if t.PkgPath() != workflowPkg {
		return nil, fmt.Errorf("%s: cannot emit a struct of type %s", where, t)
	}
	var items []jen.Code
	for i := range t.NumField() {
		f := t.Field(i)
		fv := v.Field(i)
		if !f.IsExported() {
			return nil, fmt.Errorf("%s: %s has an unexported field %s", where, t, f.Name)
		}
		if fv.IsZero() {
			continue
		}
		c, err := lw.value(fv, false, where+"."+f.Name)
		if err != nil {
			return nil, err
		}
		items = append(items, jen.Id(f.Name).Op(":").Add(c))
	}
	if elide {
		return jen.Custom(multi, items...), nil
	}
	return jen.Qual(workflowPkg, t.Name()).Custom(multi, items...), nil
}

// typeCode writes the Go type expression of t.
func typeCode(t reflect.Type) (*jen.Statement, error) {
	switch t.Kind() {
	case reflect.Pointer:
		e, err := typeCode(t.Elem())
		if err != nil {
			return nil, err
		}
		return jen.Op("*").Add(e), nil
	case reflect.Slice:
		e, err := typeCode(t.Elem())
		if err != nil {
			return nil, err
		}
		return jen.Index().Add(e), nil
	case reflect.Map:
		k, err := typeCode(t.Key())
		if err != nil {
			return nil, err
		}
		e, err := typeCode(t.Elem())
		if err != nil {
			return nil, err
		}
		return jen.Map(k).Add(e), nil
	}
	if t.PkgPath() == workflowPkg {
		return jen.Qual(workflowPkg, t.Name()), nil
	}
	if t.PkgPath() == "" && t.Name() != "" {
		return jen.Id(t.Name()), nil
	}
	return nil, fmt.Errorf("cannot emit type %s", t)
}
