package parsejson

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
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
	d.text = text
	v, err := d.value()
	if err == nil {
		if _, terr := d.dec.ReadToken(); terr != io.EOF {
			err = errors.New("invalid JSON: trailing data after the value")
		}
	}
	d.src.Reset("") // the pool keeps no reference to the document
	d.text = ""
	if err != nil {
		return nil, err // a decoder that saw an error is not reused
	}
	if len(text) <= 64<<10 && cap(d.items) <= 1024 { // nor one whose buffers grew large
		decoders.Put(d)
	}
	return v, nil
}

// decodeOptions are encoding/json's leniencies: duplicate names (the last
// wins) and invalid UTF-8 (replaced).
var decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

type decoder struct {
	src   strings.Reader
	dec   *jsontext.Decoder
	text  string // the document being read
	items []any  // elements of the arrays being read
}

// decoders keeps decoders (and their buffers) for the next document.
var decoders sync.Pool

// errEnd is the error for a document that ends before its value does.
var errEnd = errors.New("unexpected end of JSON input")

// value reads the next JSON value as a value tree. Recursion is bounded:
// decode checked the nesting first.
func (d *decoder) value() (any, error) {
	switch d.dec.PeekKind() {
	case '{':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for d.dec.PeekKind() == '"' {
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, d.end()
	case '[':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		// The elements gather on the decoder's stack (nested arrays above
		// them) and move to an array of their exact length: one
		// allocation, not one per doubling.
		base := len(d.items)
		for k := d.dec.PeekKind(); k != ']' && k != 0; k = d.dec.PeekKind() {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			d.items = append(d.items, v)
		}
		a := append(make([]any, 0, len(d.items)-base), d.items[base:]...)
		clear(d.items[base:]) // the pool keeps no reference to the values
		d.items = d.items[:base]
		return a, d.end()
	case '"':
		return d.str()
	case 'n', 't', 'f', '0':
		raw, err := d.leaf()
		if err != nil {
			return nil, err
		}
		switch raw[0] {
		case 'n':
			return nil, nil
		case 't':
			return true, nil
		case 'f':
			return false, nil
		}
		return json.Number(raw), nil // the number as written
	}
	// No value here: ReadToken says why, in the words it always used.
	switch _, err := d.dec.ReadToken(); err {
	case nil:
		return nil, errors.New("invalid JSON token") // not reached: ReadToken reports it
	case io.EOF:
		return nil, errEnd
	default:
		return nil, err
	}
}

// leaf reads the next scalar (or object name) and returns its text as it
// stands in the document: a substring, so neither it nor the numbers and
// names taken from it are copied (the value tree keeps the document
// alive, as long as the run keeps the parsed value).
func (d *decoder) leaf() (string, error) {
	raw, err := d.dec.ReadValue()
	if err != nil {
		if err == io.EOF {
			return "", errEnd
		}
		return "", err
	}
	end := int(d.dec.InputOffset())
	return d.text[end-len(raw) : end], nil
}

// str reads the next string (or object name). Without escapes and in
// valid UTF-8 it is the text between the quotes; otherwise it is
// unquoted as jsontext's Token.String does it: escapes resolved, invalid
// UTF-8 and lone surrogates replaced with U+FFFD.
func (d *decoder) str() (string, error) {
	raw, err := d.leaf()
	if err != nil {
		return "", err
	}
	if s := raw[1 : len(raw)-1]; strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s) {
		return s, nil
	}
	b, _ := jsontext.AppendUnquote(nil, raw) // the replacements above, reported as an error: not one here
	return string(b), nil
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
