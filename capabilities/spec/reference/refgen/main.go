// Command refgen writes docs/reference.md from the capability families'
// declarations: go generate ./capabilities/spec/reference.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kilnworks/kiln/capabilities/spec/reference"
)

func main() {
	out := flag.String("o", "docs/reference.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, reference.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "refgen:", err)
		os.Exit(1)
	}
}
