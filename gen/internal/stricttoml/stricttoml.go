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
)

// Decode decodes data into v. A syntax error names the file and line
// ("name:line: message"); any other decoding error names the file.
func Decode(name string, data []byte, v any) (toml.MetaData, error) {
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
