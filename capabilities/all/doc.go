// Package all links capability families into a binary and registers every
// node kind of each (families register none from init): one file per
// family, each built under `!kiln_custom || kiln_<family>`. A build without
// tags (the kiln CLI, kiln test) links every family; `-tags
// kiln_custom,kiln_<family>,...` links only those. Generated programs never
// import this package: they import and register what their workflow uses.
//
// The per-family files are generated from capabilities/catalog; a test
// fails when they drift (run `go test ./capabilities/all -update`).
package all
