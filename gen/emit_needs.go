package gen

import (
	"github.com/dave/jennifer/jen"
)

// FileNeeds is the generated file carrying the effective needs.
const FileNeeds = "needs_gen.go"

// needsFile writes needs_gen.go: the effective needs as canonical JSON
// (their SHA-256 is the manifest's effective_needs_sha256) and, for a
// degraded build, the node kinds left without a handler, registered with
// the sealed runtime at init for preflight and dispatch.
func (e *emitter) needsFile() error {
	f := e.newFile()
	f.Comment("kilnNeeds is the workflow's effective needs (canonical JSON); the binary checks them at start-up.")
	f.Const().Id("kilnNeeds").Op("=").Lit(string(e.plan.NeedsJSON))
	args := []jen.Code{jen.Index().Byte().Parens(jen.Id("kilnNeeds"))}
	for _, kind := range e.plan.Unprovided {
		args = append(args, jen.Lit(kind))
	}
	if len(e.plan.Unprovided) > 0 {
		f.Comment("Degraded build: these node kinds fail at dispatch with capability_not_provided.")
	}
	f.Func().Id("init").Params().Block(jen.Qual(sealedPkg, "RegisterNeeds").Call(args...))
	return e.render(FileNeeds, f)
}
