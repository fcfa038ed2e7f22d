package parsejson

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kilnworks/kiln/runtime/nesting"
)

// decode is runtime.DecodeJSON of text, read with jsontext's tokenizer,
// which builds the value tree in about two thirds of the time
// encoding/json takes to fill an interface (BenchmarkDecode). It gives the
// same tree: json.Number numbers as written, the last of duplicate names,
// invalid UTF-8 and lone surrogates replaced with U+FFFD, nothing but white
// space after the value; and it refuses nesting beyond nesting.MaxDepth
// with the same error, before decoding anything (TestDecodeMatchesRuntime
// and FuzzDecodeMatchesRuntime compare the two).
func decode(text string) (any, error) {
	// Read in place: nesting.JSON neither keeps nor changes its input.
	if err := nesting.JSON(unsafe.Slice(unsafe.StringData(text), len(text))); err != nil {
		return nil, err
	}
	d, _ := decoders.Get().(*decoder)
	if d == nil {
		d = &decoder{}
		d.dec = jsontext.NewDecoder(&d.src, decodeOptions...)
	}
	d.src.Reset(text)
	d.dec.Reset(&d.src, decodeOptions...)
	v, err := d.value()
	if err == nil {
		if _, terr := d.dec.ReadToken(); terr != io.EOF {
			err = errors.New("invalid JSON: trailing data after the value")
		}
	}
	d.src.Reset("") // the pool keeps no reference to the document
	if err != nil {
		return nil, err // a decoder that saw an error is not reused
	}
	if len(text) <= 64<<10 { // nor one whose buffer grew large
		decoders.Put(d)
	}
	return v, nil
}

// decodeOptions are encoding/json's leniencies: duplicate names (the last
// wins) and invalid UTF-8 (replaced).
var decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

type decoder struct {
	src strings.Reader
	dec *jsontext.Decoder
}

// decoders keeps decoders (and their buffers) for the next document.
var decoders sync.Pool

// errEnd is the error for a document that ends before its value does.
var errEnd = errors.New("unexpected end of JSON input")

// value reads the next JSON value as a value tree. Recursion is bounded:
// decode checked the nesting first.
func (d *decoder) value() (any, error) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		if err == io.EOF {
			return nil, errEnd
		}
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case '{':
		m := map[string]any{}
		for d.dec.PeekKind() == '"' {
			name, err := d.dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String() // before the next read voids the token
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, d.end()
	case '[':
		a := []any{}
		for k := d.dec.PeekKind(); k != ']' && k != 0; k = d.dec.PeekKind() {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, d.end()
	}
	return nil, errors.New("invalid JSON token") // not reached: ReadToken reports it
}

// end reads the '}' or ']' closing an object or array, or the error in
// its place.
func (d *decoder) end() error {
	_, err := d.dec.ReadToken()
	if err == io.EOF {
		return errEnd
	}
	return err
}
