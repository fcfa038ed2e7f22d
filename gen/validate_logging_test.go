package gen

import (
	"path/filepath"
	"testing"
)

// TestLoggingRotationValidation: [logging] rotation must be a known value
// and have a file target to rotate ([logging] target or [logging.audit]
// target); the standard streams are not rotated.
func TestLoggingRotationValidation(t *testing.T) {
	refused := []struct{ file, want string }{
		{"invalid_logging_rotation.toml", `[logging]: rotation "weekly" must be never, minutely, hourly or daily`},
		{"invalid_logging_rotation_stream.toml", `[logging]: rotation "daily" needs a file:PATH target ([logging] or [logging.audit]); stderr and stdout are not rotated`},
	}
	for _, tc := range refused {
		issues := loadIssues(t, filepath.Join("../testdata/validate", tc.file))
		if len(issues) != 1 || issues[0].Code != "invalid_logging" || issues[0].Message != tc.want {
			t.Errorf("%s: got %v, want invalid_logging %q", tc.file, issues, tc.want)
		}
	}

	dir := t.TempDir()
	for name, logging := range map[string]string{
		"no-target.toml":    "rotation = \"hourly\"\n",
		"audit-stderr.toml": "rotation = \"minutely\"\naudit = { target = \"stderr\" }\n",
	} {
		issues := loadIssues(t, write(t, dir, name, "name = \"t\"\n[[nodes]]\nid = \"done\"\ntype = \"terminate\"\n[logging]\n"+logging))
		if len(issues) != 1 || issues[0].Code != "invalid_logging" {
			t.Errorf("%s: got %v", name, issues)
		}
	}
	for name, logging := range map[string]string{
		"file.toml":          "target = \"file:kiln.log\"\nrotation = \"daily\"\n",
		"audit-file.toml":    "target = \"stdout\"\nrotation = \"hourly\"\naudit = { target = \"file:audit.log\" }\n",
		"never-stdout.toml":  "target = \"stdout\"\nrotation = \"never\"\n",
		"minutely-file.toml": "target = \"file:/var/log/kiln.log\"\nrotation = \"minutely\"\n",
	} {
		path := write(t, dir, name, "name = \"t\"\n[[nodes]]\nid = \"done\"\ntype = \"terminate\"\n[logging]\n"+logging)
		if _, err := Load(path, LoadOptions{}); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}
