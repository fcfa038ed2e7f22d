package wfpath

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "here.pem"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, p, want string }{
		{dir, "here.pem", filepath.Join(dir, "here.pem")}, // beside the workflow
		{dir, "elsewhere.pem", "elsewhere.pem"},           // left to the working directory
		{dir, "/abs/x.pem", "/abs/x.pem"},
		{"", "here.pem", "here.pem"},
	} {
		if got := Resolve(c.dir, c.p); got != c.want {
			t.Errorf("Resolve(%q, %q) = %q, want %q", c.dir, c.p, got, c.want)
		}
	}
}
