// Package depspin keeps the project's third-party modules in go.mod while the
// packages that use them are written. It is imported by nothing.
package depspin

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/dave/jennifer/jen"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/mark3labs/mcp-go/client"
	_ "github.com/mark3labs/mcp-go/mcp"
	_ "github.com/mark3labs/mcp-go/mcptest"
	_ "github.com/mark3labs/mcp-go/server"
	_ "github.com/robfig/cron/v3"
	_ "github.com/santhosh-tekuri/jsonschema/v5"
	_ "github.com/sigstore/sigstore/pkg/cryptoutils"
	_ "github.com/sigstore/sigstore/pkg/signature"
	_ "golang.org/x/tools/go/packages"
	_ "golang.org/x/tools/imports"
)
