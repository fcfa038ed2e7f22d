// Package mcp is the mcp capability family of kiln (see capabilities/catalog).
// Its node kinds and hooks register themselves from init.
package mcp
