package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/kilnworks/kiln/runtime"
)

// parseBody turns a request body into the trigger payload by content
// type (docs/serve.md): urlencoded forms and multipart text fields
// become flat objects of strings; anything else is JSON (empty = null).
// dropped lists the multipart file parts that were discarded.
func parseBody(contentType string, body []byte) (payload any, dropped []string, err error) {
	mediaType, params := "", map[string]string(nil)
	if contentType == "application/json" {
		mediaType = contentType // the common case needs no parsing
	} else if contentType != "" {
		mediaType, params, err = mime.ParseMediaType(contentType)
		if err != nil {
			return nil, nil, fmt.Errorf("malformed Content-Type %q", contentType)
		}
	}
	switch mediaType {
	case "application/x-www-form-urlencoded":
		p, err := parseForm(body)
		return p, nil, err
	case "multipart/form-data":
		return parseMultipart(body, params["boundary"])
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, nil
	}
	if !utf8.Valid(body) {
		return nil, nil, errors.New("body is not valid UTF-8 JSON")
	}
	v, err := runtime.DecodeJSON(body)
	if err != nil {
		what := "body"
		if mediaType != "" && mediaType != "application/json" {
			what = "body of Content-Type " + mediaType
		}
		return nil, nil, fmt.Errorf("%s is not valid JSON: %v", what, err)
	}
	return v, nil, nil
}

// parseForm decodes application/x-www-form-urlencoded strictly: bad
// percent escapes, ';' separators and non-UTF-8 text are errors;
// duplicate keys keep the last value.
func parseForm(body []byte) (map[string]any, error) {
	out := map[string]any{}
	for _, pair := range strings.Split(string(body), "&") {
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return nil, errors.New("form body: ';' is not a field separator")
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("form body: malformed escape in field name: %v", err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("form body: malformed escape in field %q: %v", key, err)
		}
		if !utf8.ValidString(key) || !utf8.ValidString(val) {
			return nil, errors.New("form body: field is not valid UTF-8")
		}
		out[key] = val
	}
	return out, nil
}

// parseMultipart keeps the text fields of a multipart/form-data body as
// a flat object (last wins) and drops file parts (any part with a
// filename), returning their field names for the audit log.
func parseMultipart(body []byte, boundary string) (map[string]any, []string, error) {
	if boundary == "" {
		return nil, nil, errors.New("multipart body: Content-Type has no boundary")
	}
	out := map[string]any{}
	var dropped []string
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("multipart body: %v", err)
		}
		name := part.FormName()
		if part.FileName() != "" {
			dropped = append(dropped, name)
			continue
		}
		if name == "" {
			return nil, nil, errors.New("multipart body: part without a form field name")
		}
		val, err := io.ReadAll(part)
		if err != nil {
			return nil, nil, fmt.Errorf("multipart body: field %q: %v", name, err)
		}
		if !utf8.Valid(val) || !utf8.ValidString(name) {
			return nil, nil, fmt.Errorf("multipart body: field %q is not valid UTF-8 text", name)
		}
		out[name] = string(val)
	}
	return out, dropped, nil
}

// compileSchema compiles a route's input_schema from the workflow's
// loaded assets, through the schema family (runtime.CompileSchema): a
// binary without it refuses the route rather than serve it unvalidated.
// Every $ref outside the document is refused: a webhook must not make
// the server fetch anything.
func compileSchema(path string, assets map[string][]byte) (runtime.SchemaValidator, error) {
	data, ok := assets[path]
	if !ok {
		return nil, fmt.Errorf("input_schema %q was not loaded with the workflow", path)
	}
	s, err := runtime.CompileSchema(path, data)
	if err != nil {
		return nil, fmt.Errorf("input_schema %q: %v", path, err)
	}
	return s, nil
}

// schemaErrors validates v and returns every leaf failure as
// "<instance location>: <message>", sorted; nil when v is valid.
func schemaErrors(s runtime.SchemaValidator, v any) []string {
	leaves := s.Validate(v)
	if len(leaves) == 0 {
		return nil
	}
	out := make([]string, len(leaves))
	for i, l := range leaves {
		out[i] = l.String()
	}
	sort.Strings(out)
	return out
}
