package manifest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TablesDigest returns the hex SHA-256 of the canonical JSON of a workflow
// tree: every field, children and embedded assets included, with Source
// (the path a file was read from) cleared. The generator records it for
// the loaded workflow; the sealed binary recomputes it from its static
// tables at every start-up and in `BIN verify`, so a changed table or
// asset is caught before anything runs.
//
// The canonical JSON is exactly what json.Marshal writes for the tree (the
// format tables_sha256 has always had). It is written by an encoder of its own rather
// than json.Marshal because json.Marshal builds its encoders by reflection
// on first use, about 0.7 ms that every sealed binary would pay at
// start-up; TestTablesDigestIsJSON keeps the two byte-identical.
func TablesDigest(wf *workflow.Workflow) (string, error) {
	e := &encoder{fields: map[reflect.Type][]field{}}
	data, err := e.append(nil, reflect.ValueOf(withoutSource(wf)))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// withoutSource returns a shallow copy of the tree with Source cleared.
func withoutSource(wf *workflow.Workflow) *workflow.Workflow {
	if wf == nil {
		return nil
	}
	c := *wf
	c.Source = ""
	if wf.Children != nil {
		c.Children = make(map[string]*workflow.Workflow, len(wf.Children))
		for k, ch := range wf.Children {
			c.Children[k] = withoutSource(ch)
		}
	}
	return &c
}

// encoder writes the encoding json.Marshal gives a value, for the kinds
// the workflow types are made of (plain data: structs without json tags,
// pointers, slices, string-keyed maps, []byte, scalars). Anything else is
// an error rather than a guess, so a new kind of field cannot silently
// leave the digest.
type encoder struct {
	fields map[reflect.Type][]field // per struct type, listed once per digest
}

// field is an exported struct field: its index and its name.
type field struct {
	index int
	name  string
}

func (e *encoder) structFields(t reflect.Type) ([]field, error) {
	if fs, ok := e.fields[t]; ok {
		return fs, nil
	}
	fs := make([]field, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if _, tagged := f.Tag.Lookup("json"); tagged || f.Anonymous {
			return nil, fmt.Errorf("tables digest: %s.%s: json tags and embedded fields are not supported", t.Name(), f.Name)
		}
		fs = append(fs, field{i, f.Name})
	}
	e.fields[t] = fs
	return fs, nil
}

func (e *encoder) append(b []byte, v reflect.Value) ([]byte, error) {
	var err error
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return e.append(b, v.Elem())
	case reflect.Struct:
		fs, err := e.structFields(v.Type())
		if err != nil {
			return nil, err
		}
		b = append(b, '{')
		for i, f := range fs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, f.name), ':')
			if b, err = e.append(b, v.Field(f.index)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case reflect.Slice:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, v.Bytes())
			return append(b, '"'), nil
		}
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = e.append(b, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case reflect.Map:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("tables digest: map key type %s is not supported", v.Type().Key())
		}
		// Sorted byte-wise, as json.Marshal sorts them. MapRange and
		// sort.Slice rather than MapKeys, MapIndex or slices.SortFunc: the
		// sealed binary links them already (for encoding/json).
		type entry struct {
			key string
			val reflect.Value
		}
		entries := make([]entry, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			entries = append(entries, entry{it.Key().String(), it.Value()})
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
		b = append(b, '{')
		for i, en := range entries {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, en.key), ':')
			if b, err = e.append(b, en.val); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case reflect.String:
		return appendString(b, v.String()), nil
	case reflect.Bool:
		return strconv.AppendBool(b, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		// json's float format (and its refusal of NaN and infinities).
		data, err := json.Marshal(v.Interface())
		if err != nil {
			return nil, fmt.Errorf("tables digest: %v", err)
		}
		return append(b, data...), nil
	}
	return nil, fmt.Errorf("tables digest: values of kind %s are not supported", v.Kind())
}

// appendString appends s as a JSON string the way json.Marshal quotes it.
// Printable ASCII that json leaves alone is copied; anything else (escapes,
// HTML-sensitive bytes, non-ASCII, invalid UTF-8) goes through json itself.
func appendString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s) // a string always encodes
			return append(b, data...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
