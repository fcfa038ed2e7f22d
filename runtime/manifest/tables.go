package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TablesDigest returns the hex SHA-256 of the canonical JSON of a workflow
// tree: every field, children and embedded assets included, with Source
// (the path a file was read from) cleared. The generator records it for
// the loaded workflow; the sealed binary recomputes it from its static
// tables, so a changed table or asset is caught (`BIN verify`).
func TablesDigest(wf *workflow.Workflow) (string, error) {
	data, err := json.Marshal(withoutSource(wf))
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
