package rego_test

import (
	"sync"
	"testing"

	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestPreparedPoliciesAreNotConfused: policies are prepared once per
// distinct source, data, query and file content; two that differ in any
// of them never share a decision.
func TestPreparedPoliciesAreNotConfused(t *testing.T) {
	src := "package agent\nallow if input.args.key == data.key\n"
	read := func(r *workflow.RegoPolicy, files map[string][]byte, key string) error {
		t.Helper()
		pol, err := policy.Compile(&workflow.Policy{Env: &workflow.EnvPolicy{ReadKeys: []string{"*"}}, Rego: r}, files)
		if err != nil {
			t.Fatal(err)
		}
		return pol.EnvRead(key)
	}
	for _, c := range []struct {
		name  string
		r     *workflow.RegoPolicy
		files map[string][]byte
	}{
		{"data", &workflow.RegoPolicy{Inline: src, Data: map[string]string{"key": "A"}}, nil},
		{"query", &workflow.RegoPolicy{Inline: src + "b if input.args.key == \"A\"\n", Query: "data.agent.b", Data: map[string]string{"key": "B"}}, nil},
		{"file", &workflow.RegoPolicy{File: "p.rego"}, map[string][]byte{"p.rego": []byte("package agent\nallow if input.args.key == \"A\"\n")}},
	} {
		if err := read(c.r, c.files, "A"); err != nil {
			t.Errorf("%s: A denied: %v", c.name, err)
		}
		// The same policy with one part changed decides differently.
		other := *c.r
		files := c.files
		switch c.name {
		case "data":
			other.Data = map[string]string{"key": "B"}
		case "query":
			other.Query = "data.agent.allow"
		case "file":
			files = map[string][]byte{"p.rego": []byte("package agent\nallow if input.args.key == \"B\"\n")}
		}
		if err := read(&other, files, "A"); !policy.IsDenial(err) {
			t.Errorf("%s: a policy differing only in its %s reused the first one's decision: %v", c.name, c.name, err)
		}
	}
}

// TestConcurrentDecisions: one prepared policy decides for many runs at
// once (run with -race).
func TestConcurrentDecisions(t *testing.T) {
	pol, err := policy.Compile(&workflow.Policy{
		FS:   &workflow.FSPolicy{Read: []string{"/**"}},
		Rego: &workflow.RegoPolicy{Inline: ReferencePolicy, Data: map[string]string{"safe_prefix": "/data/safe/"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				path, allowed := "/data/safe/f", true
				if (i+j)%2 == 1 {
					path, allowed = "/data/private/f", false
				}
				if _, err := pol.FSRead(path); (err == nil) != allowed {
					t.Errorf("FSRead(%s) = %v", path, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
