// Package secrets is the secrets capability family of kiln (see capabilities/catalog).
// Its node kinds and hooks register themselves from init.
package secrets
