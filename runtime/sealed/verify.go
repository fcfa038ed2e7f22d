package sealed

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// verify is `BIN verify`: the binary checks, without key or network, that
// what it carries is what the generator recorded (sealProblems) and says
// which checks passed. It proves integrity, not origin; `kiln verify` with
// the public key proves who built it.
func verify(w io.Writer, wf *workflow.Workflow, m *manifest.Manifest) error {
	if problems := sealProblems(wf, m); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(w, "FAIL %s\n", p)
		}
		return fmt.Errorf("verification failed: %s", problems[0])
	}
	sources := map[string]bool{}
	for _, t := range workflow.Tree(wf) {
		sources[t.Digest] = true
	}
	fmt.Fprintf(w, "ok   workflow %s: %d embedded workflow source(s) match their digests\n", m.Workflow.Name, len(sources))
	fmt.Fprintf(w, "ok   static tables match tables_sha256 %s\n", m.TablesSHA256)
	fmt.Fprintf(w, "ok   all %d manifest inputs are embedded\n", len(m.Inputs))
	if m.EffectiveNeedsSHA256 != "" {
		fmt.Fprintf(w, "ok   embedded effective needs match effective_needs_sha256 %s\n", m.EffectiveNeedsSHA256)
	}
	return nil
}

// checkSeal is the start-up check: a binary whose tables, needs, embedded
// sources or manifest were changed after sealing (a widened policy glob
// patched into its data, say) must not run anything.
func checkSeal(wf *workflow.Workflow, m *manifest.Manifest) error {
	if problems := sealProblems(wf, m); len(problems) > 0 {
		return fmt.Errorf("this binary was altered after sealing: %s", problems[0])
	}
	return nil
}

// sealProblems lists every way the binary differs from what the generator
// recorded in its manifest: the compiled-in workflow is the one the
// manifest names, each embedded workflow source hashes to its workflow's
// digest, the static tables (the compiled workflow tree with its assets)
// hash to tables_sha256, the embedded needs to effective_needs_sha256, and
// every input the manifest lists is embedded. None is the empty list.
func sealProblems(wf *workflow.Workflow, m *manifest.Manifest) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if m.Workflow.Name != wf.Name || m.Workflow.Digest != wf.Digest {
		fail("embedded manifest describes workflow %q (sha256 %s), but the compiled-in workflow is %q (sha256 %s)",
			m.Workflow.Name, m.Workflow.Digest, wf.Name, wf.Digest)
	}

	workflows := map[string]bool{} // digests of the workflows in the tree
	assets := map[string]bool{}    // digests of the embedded assets
	// Sources are checked in the tree's order, each digest once.
	for _, w := range workflow.Tree(wf) {
		for _, data := range w.Assets {
			assets[digest(data)] = true
		}
		d := w.Digest
		if workflows[d] {
			continue
		}
		workflows[d] = true
		src, ok := Source(d)
		switch {
		case !ok:
			fail("no embedded source for the workflow with sha256 %s", d)
		case digest(src) != d:
			fail("embedded workflow source hashes to %s, but its compiled-in table says %s", digest(src), d)
		}
	}

	got, err := manifest.TablesDigest(wf)
	switch {
	case err != nil:
		fail("cannot digest the static tables: %v", err)
	case m.TablesSHA256 == "":
		fail("the manifest has no tables_sha256 to check the static tables against")
	case got != m.TablesSHA256:
		fail("static tables hash to %s, but the manifest says tables_sha256 %s", got, m.TablesSHA256)
	}

	if err := checkNeeds(m); err != nil { // needs.go
		fail("%v", err)
	}

	for _, in := range m.Inputs {
		switch in.Kind {
		case "workflow", "child":
			if !workflows[in.SHA256] {
				fail("manifest input %s (%s, sha256 %s) is not a compiled-in workflow", in.Path, in.Kind, in.SHA256)
			}
		case "schema", "prompt", "jwks":
			if !assets[in.SHA256] {
				fail("manifest input %s (%s, sha256 %s) is not an embedded asset", in.Path, in.Kind, in.SHA256)
			}
		}
	}
	return problems
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
