// Package stricttoml decodes the small TOML files kiln reads besides
// workflows (needs catalogs, build profiles, fixtures) with the syntax
// error reporting they share; each caller then refuses the keys it did
// not decode, in its own words.
package stricttoml

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/gen/internal/tomlkeys"
	"github.com/kilnworks/kiln/runtime/nesting"
)

// Decode decodes data into v, refusing first a document nested too deep
// (see runtime/nesting). A syntax error names the file and line
// ("name:line: message"); any other decoding error names the file.
func Decode(name string, data []byte, v any) (toml.MetaData, error) {
	// The decoder's cost grows with the square of the nesting: refuse deep
	// documents before it runs.
	if err := nesting.TOML(data); err != nil {
		var ne *nesting.Error
		errors.As(err, &ne)
		return toml.MetaData{}, fmt.Errorf("%s:%d: %s", name, ne.Line, ne.Msg)
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(v)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return md, fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
		}
		return md, fmt.Errorf("%s: %v", name, err)
	}
	return md, nil
}

// Line is the line where key (as MetaData reports it, say an undecoded
// key) is first defined in data, or 1 when it cannot be found.
func Line(data []byte, key toml.Key) int {
	if line := tomlkeys.Scan(string(data)).FirstLine(key); line > 0 {
		return line
	}
	return 1
}
