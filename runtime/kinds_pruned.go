//go:build kiln_custom

package runtime

// ProgramRegistersKinds is true in a pruned build (-tags kiln_custom, as
// kiln build compiles a sealed binary): capability families then register
// no node kind themselves, and the generated program registers each kind
// its workflow uses, so the linker leaves out the code of the others.
const ProgramRegistersKinds = true
