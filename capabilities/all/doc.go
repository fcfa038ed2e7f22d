// Package all links capability families into a binary: one file per
// family, each built under `!kiln_custom || kiln_<family>`. A build without
// tags (the kiln CLI) links every family; a pruned build passes
// `-tags kiln_custom,kiln_<family>,...` and links only those.
//
// The per-family files are generated from capabilities/catalog; a test
// fails when they drift (run `go test ./capabilities/all -update`).
package all
