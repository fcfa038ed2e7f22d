// Package needs reads needs catalogs (AgentNeeds and DependencyNeeds,
// in TOML; docs/needs.md) and computes a workflow's effective needs: the
// needs of every class the workflow uses, merged, deduplicated and checked
// against the workflow's own [policy].
package needs

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/kilnworks/kiln/gen/internal/stricttoml"
)

// Catalog is one needs catalog file.
type Catalog struct {
	// Conflict = "broader" lets a filesystem conflict (ro vs rw on one
	// path) resolve to the broader mode; by default a conflict fails.
	Conflict        string  `toml:"conflict"`
	AgentNeeds      []Entry `toml:"agent_needs"`
	DependencyNeeds []Entry `toml:"dependency_needs"`

	File string `toml:"-"` // where it was read from ("builtin" for kiln's own)
	// SHA256 is the hex digest of the file's bytes (a build input).
	SHA256 string `toml:"-"`
}

// Entry maps a class name to its needs.
type Entry struct {
	ClassName string `toml:"class_name"`
	Conflict  string `toml:"conflict"`
	Needs     Needs  `toml:"needs"`
}

// Needs are the five categories of docs/needs.md.
type Needs struct {
	Secrets      []SecretNeed     `toml:"secrets"`
	OAuth        []OAuthNeed      `toml:"oauth"`
	Capabilities []CapabilityNeed `toml:"capabilities"`
	Network      *NetworkNeed     `toml:"network"`
	Filesystem   *FilesystemNeed  `toml:"filesystem"`
}

// SecretNeed is a secret referenced by key only, never by value. Needs are
// mandatory unless optional = true (fail closed).
type SecretNeed struct {
	Key      string `toml:"key"`
	Label    string `toml:"label"`
	Optional bool   `toml:"optional"`
}

type OAuthNeed struct {
	Provider string   `toml:"provider"`
	Label    string   `toml:"label"`
	Scopes   []string `toml:"scopes"`
	Optional bool     `toml:"optional"`
}

type CapabilityNeed struct {
	Type     string `toml:"type"`
	Label    string `toml:"label"`
	Optional bool   `toml:"optional"`
}

type NetworkNeed struct {
	Allow    []string `toml:"allow"`
	Optional bool     `toml:"optional"`
}

type FilesystemNeed struct {
	Allow    []PathNeed `toml:"allow"`
	Optional bool       `toml:"optional"`
}

type PathNeed struct {
	Path  string `toml:"path"`
	Mode  string `toml:"mode"` // ro | rw
	Label string `toml:"label"`
}

//go:embed builtin.toml
var builtinTOML []byte

// Builtin returns kiln's own catalog for its families and providers.
func Builtin() *Catalog {
	c, err := Decode("builtin", builtinTOML)
	if err != nil {
		panic("kiln: builtin needs catalog: " + err.Error())
	}
	return c
}

// Load reads a catalog file strictly.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("needs catalog: %w", err)
	}
	return Decode(path, data)
}

// Decode strictly decodes a catalog: unknown keys and bad values are
// errors naming the file (and line, for syntax errors and unknown keys).
func Decode(name string, data []byte) (*Catalog, error) {
	var c Catalog
	md, err := stricttoml.Decode(name, data, &c)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, fmt.Errorf("%s:%d: unknown key %q", name, stricttoml.Line(data, und[0]), und[0].String())
	}
	c.File = name
	sum := sha256.Sum256(data)
	c.SHA256 = hex.EncodeToString(sum[:])
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &c, nil
}

func (c *Catalog) check() error {
	if c.Conflict != "" && c.Conflict != "broader" && c.Conflict != "fail" {
		return fmt.Errorf("conflict must be \"broader\" or \"fail\", not %q", c.Conflict)
	}
	seen := map[string]bool{}
	for _, list := range [][]Entry{c.AgentNeeds, c.DependencyNeeds} {
		for i, e := range list {
			if e.ClassName == "" {
				return fmt.Errorf("entry %d: class_name is required", i+1)
			}
			if seen[e.ClassName] {
				return fmt.Errorf("class %q is declared twice", e.ClassName)
			}
			seen[e.ClassName] = true
			if e.Conflict != "" && e.Conflict != "broader" && e.Conflict != "fail" {
				return fmt.Errorf("class %q: conflict must be \"broader\" or \"fail\"", e.ClassName)
			}
			n := e.Needs
			for _, s := range n.Secrets {
				if s.Key == "" {
					return fmt.Errorf("class %q: a secret need has no key", e.ClassName)
				}
			}
			for _, o := range n.OAuth {
				if o.Provider == "" {
					return fmt.Errorf("class %q: an oauth need has no provider", e.ClassName)
				}
			}
			for _, cp := range n.Capabilities {
				if cp.Type == "" {
					return fmt.Errorf("class %q: a capability need has no type", e.ClassName)
				}
			}
			if n.Network != nil {
				for _, h := range n.Network.Allow {
					if h == "" {
						return fmt.Errorf("class %q: empty network host", e.ClassName)
					}
				}
			}
			if n.Filesystem != nil {
				for _, p := range n.Filesystem.Allow {
					if p.Path == "" {
						return fmt.Errorf("class %q: a filesystem need has no path", e.ClassName)
					}
					if p.Mode != "ro" && p.Mode != "rw" {
						return fmt.Errorf("class %q: filesystem path %q: mode must be \"ro\" or \"rw\"", e.ClassName, p.Path)
					}
				}
			}
		}
	}
	return nil
}
