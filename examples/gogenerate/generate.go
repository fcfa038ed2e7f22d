// Package gogenerate shows kiln driven by go generate: the directive below
// turns workflow.toml into the sealed program in ./agent, which a plain
// `go build ./agent` compiles. kiln is pinned as a tool in go.mod
// (`go get -tool github.com/kilnworks/kiln/cmd/kiln`), so CI can run
// `go generate ./... && git diff --exit-code` to catch a stale program.
package gogenerate

//go:generate go tool kiln gen workflow.toml -o ./agent
