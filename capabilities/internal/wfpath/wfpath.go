// Package wfpath resolves file paths a workflow declares (TLS files,
// secret files): the one rule the families share.
package wfpath

import (
	"os"
	"path/filepath"
)

// Resolve tries a relative path against dir, the directory of the workflow
// file that declares it, first, then leaves it to the working directory.
// An absolute path, or an empty dir, is returned as it is.
func Resolve(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	if cand := filepath.Join(dir, p); exists(cand) {
		return cand
	}
	return p
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
