// Package needs holds a workflow's effective needs (the secrets, OAuth
// accounts, capabilities, network hosts and filesystem paths it requires)
// and evaluates them at start-up: the preflight that blocks a run while a
// mandatory need is unmet. The generator computes the effective needs from
// needs catalogs (package gen/needs) and embeds them; this package only
// reads them, so sealed binaries link no catalog code.
package needs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// Need kinds.
const (
	KindSecret     = "secret"
	KindOAuth      = "oauth"
	KindCapability = "capability"
	KindNetwork    = "network"
	KindFilesystem = "filesystem"
)

// Need is one merged, deduplicated requirement with its provenance.
type Need struct {
	ID       string   `json:"id"`   // secret:KEY, oauth:PROVIDER, capability:TYPE, network:HOST, filesystem:PATH:MODE
	Kind     string   `json:"kind"` // one of the Kind constants
	Label    string   `json:"label,omitempty"`
	Optional bool     `json:"optional"`
	Key      string   `json:"key,omitempty"`      // secret
	Provider string   `json:"provider,omitempty"` // oauth
	Scopes   []string `json:"scopes,omitempty"`   // oauth, sorted
	Type     string   `json:"type,omitempty"`     // capability
	Host     string   `json:"host,omitempty"`     // network
	Path     string   `json:"path,omitempty"`     // filesystem
	Mode     string   `json:"mode,omitempty"`     // filesystem: ro | rw
	// Sources are the catalog classes that asked for this need, sorted.
	Sources []string `json:"sources"`
	// BeyondPolicy is set when the workflow's own [policy] does not allow
	// what the need asks for: the policy is the ceiling, so such a need
	// can never be met by this workflow as written.
	BeyondPolicy string `json:"beyond_policy,omitempty"`
}

// Effective is the effective needs of one workflow.
type Effective struct {
	Workflow string `json:"workflow"`
	Needs    []Need `json:"needs"`
}

// Sort puts needs in their canonical order (by id).
func (e *Effective) Sort() {
	for i := range e.Needs {
		sort.Strings(e.Needs[i].Sources)
		sort.Strings(e.Needs[i].Scopes)
	}
	sort.Slice(e.Needs, func(i, j int) bool { return e.Needs[i].ID < e.Needs[j].ID })
}

// Canonical renders the effective needs as canonical JSON: sorted, compact,
// no HTML escaping. Its SHA-256 is the needs digest in the manifest.
func (e *Effective) Canonical() ([]byte, error) {
	c := *e
	c.Needs = append([]Need(nil), e.Needs...)
	if c.Needs == nil {
		c.Needs = []Need{}
	}
	for i := range c.Needs {
		if c.Needs[i].Sources == nil {
			c.Needs[i].Sources = []string{}
		}
	}
	c.Sort()
	return marshal(&c)
}

// Digest is the hex SHA-256 of Canonical.
func (e *Effective) Digest() (string, error) {
	b, err := e.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Parse reads canonical (or any) JSON effective needs.
func Parse(data []byte) (*Effective, error) {
	var e Effective
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

func marshal(v any) ([]byte, error) {
	var buf jsonBuffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.b
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return b, nil
}

type jsonBuffer struct{ b []byte }

func (w *jsonBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
