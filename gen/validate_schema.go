package gen

import (
	"errors"
	"fmt"

	"github.com/kilnworks/kiln/capabilities/schema"
	"github.com/kilnworks/kiln/capabilities/spec"
)

// errRemoteRef marks a schema that tried to load another document.
var errRemoteRef = errors.New("remote $ref")

// schemaIssues compiles a JSON Schema from its loaded bytes. Nothing is
// ever fetched: every $ref outside the document itself is an issue.
func schemaIssues(key, path string, data []byte) []spec.Issue {
	err := compileSchema(path, data)
	if err == nil {
		return nil
	}
	code := "schema_invalid"
	if errors.Is(err, errRemoteRef) {
		code = "schema_remote_ref"
	}
	var is spec.Issues
	is.Add(code, "%s %q: %v", key, path, err)
	return is
}

func compileSchema(path string, data []byte) error {
	_, err := schema.Compile(path, data)
	var re *schema.RefError
	var je *schema.JSONError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("%w %s is not allowed: schemas are compiled offline and may only use $ref within the document", errRemoteRef, re.Ref)
	case errors.As(err, &je):
		return fmt.Errorf("not valid JSON: %v", je.Err)
	case err != nil:
		return fmt.Errorf("does not compile as JSON Schema: %v", err)
	}
	return nil
}
