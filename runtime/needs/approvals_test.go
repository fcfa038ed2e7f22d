package needs

import (
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// viaLibrary decodes an approvals document with BurntSushi/toml, strictly
// (the reference the small reader must agree with).
func viaLibrary(src string) (*Approvals, error) {
	var a Approvals
	md, err := toml.Decode(src, &a)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, &toml.ParseError{Message: "undecoded " + und[0].String()}
	}
	return &a, nil
}

// TestApprovalsReaderAgreesWithTOML: documents both accept decode to the
// same approvals; documents the library rejects are rejected too.
func TestApprovalsReaderAgreesWithTOML(t *testing.T) {
	valid := []string{
		"",
		"# nothing approved\n",
		`network = ["api.github.com", "*.example.com"]`,
		"network = []\ncapabilities = ['network', \"process\"] # trailing comment\n",
		"network = [\n  \"a.example.com\", # first\n  'b.example.com',\n]\n",
		"capabilities = [\"listen\"]\r\n[[filesystem]]\r\npath = \"/srv/triage\"\r\nmode = \"rw\"\r\n",
		`[[filesystem]]
path = 'C:\data'
mode = "ro"

[[filesystem]]
path = "/srv/\u00e9t\u00E9 \"quoted\""
mode = "rw"

[[oauth]]
provider = "google"
scopes = ["gmail.readonly", "calendar"]
[[oauth]]
provider = "github"
`,
		"  network\t=\t[ \"x\" ]  \n",
	}
	for _, src := range valid {
		want, err := viaLibrary(src)
		if err != nil {
			t.Fatalf("library rejects a valid test document %q: %v", src, err)
		}
		got, err := decodeApprovals(src)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Errorf("%q:\n got %+v\nwant %+v", src, got, want)
		}
	}
	invalid := map[string]string{
		"unknown key":          `networks = ["x"]`,
		"unknown table key":    "[[filesystem]]\npath = \"/a\"\nowner = \"me\"\n",
		"root key after table": "[[oauth]]\nprovider = \"g\"\nnetwork = [\"x\"]\n",
		"plain table":          "[filesystem]\npath = \"/a\"\n",
		"unknown table":        "[[secrets]]\n",
		"not an array":         `network = "x"`,
		"not strings":          `network = [1, 2]`,
		"duplicate":            "network = []\nnetwork = []\n",
		"unterminated":         `network = ["x"`,
		"bad escape":           `network = ["\q"]`,
		"newline in string":    "network = [\"x\n\"]",
		"two values":           `network = [] []`,
		"no equals":            `network ["x"]`,
		"missing comma":        `network = ["a" "b"]`,
	}
	for name, src := range invalid {
		if _, err := viaLibrary(src); err == nil {
			t.Fatalf("%s: the library accepts %q; not an invalid document", name, src)
		}
		if a, err := decodeApprovals(src); err == nil {
			t.Errorf("%s: accepted %q as %+v", name, src, a)
		} else if !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("%s: error does not name the line: %v", name, err)
		}
	}
}

// normalize makes nil and empty slices compare equal.
func normalize(a *Approvals) *Approvals {
	c := *a
	if len(c.Network) == 0 {
		c.Network = nil
	}
	if len(c.Capabilities) == 0 {
		c.Capabilities = nil
	}
	for i := range c.OAuth {
		if len(c.OAuth[i].Scopes) == 0 {
			c.OAuth[i].Scopes = nil
		}
	}
	return &c
}
