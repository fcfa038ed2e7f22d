//go:build !kiln_custom

package runtime

// ProgramRegistersKinds is false in any build but a pruned one: each
// capability family registers all its node kinds from init.
const ProgramRegistersKinds = false
