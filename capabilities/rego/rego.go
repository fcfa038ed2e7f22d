// Package rego is the Rego policy capability family (build tag
// kiln_rego): it evaluates a workflow's [policy.rego] with the Open Policy
// Agent as an additional AND on every tool decision the static allowlists
// allow (docs/policy.md). Only binaries whose workflow declares
// [policy.rego] link it, and with it OPA; the runtime reaches it through
// the decision hook of runtime/policy and never links OPA itself.
package rego

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	"github.com/kilnworks/kiln/capabilities/rego/compile"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	policy.RegisterRego(prepare)
}

// maxCached bounds the prepared policies kept: a process serves one
// workflow tree, but the agent loop compiles a copy of its program per
// run, and that copy must not prepare the policy again.
const maxCached = 64

var (
	cacheMu sync.Mutex
	cache   = map[[32]byte]*compile.Decider{}
)

// prepare compiles r once per distinct policy (source, data and query).
func prepare(r *workflow.RegoPolicy, files map[string][]byte) (policy.Decider, error) {
	key := digest(r, files)
	cacheMu.Lock()
	d, ok := cache[key]
	cacheMu.Unlock()
	if ok {
		return d, nil
	}
	d, err := compile.Prepare(r, files)
	if err != nil {
		return nil, err
	}
	cacheMu.Lock()
	if len(cache) >= maxCached {
		clear(cache)
	}
	cache[key] = d
	cacheMu.Unlock()
	return d, nil
}

// digest identifies everything a prepared policy depends on; each part is
// length-prefixed so no two policies share a digest.
func digest(r *workflow.RegoPolicy, files map[string][]byte) [32]byte {
	h := sha256.New()
	put := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	put(r.File)
	if r.File != "" {
		data, ok := files[r.File]
		put(fmt.Sprint(ok))
		put(string(data))
	}
	put(r.Inline)
	put(r.Query)
	keys := make([]string, 0, len(r.Data))
	for k := range r.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		put(k)
		put(r.Data[k])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
