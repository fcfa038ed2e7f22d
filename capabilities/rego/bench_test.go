package rego_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/rego/compile"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// BenchmarkRegoDecision is the cost of one [policy.rego] decision with the
// prepared query of the reference's example policy (target: under 20 µs).
func BenchmarkRegoDecision(b *testing.B) {
	d, err := compile.Prepare(&workflow.RegoPolicy{Inline: ReferencePolicy, Data: map[string]string{"safe_prefix": "/data/safe/"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	allow := policy.Request{Tool: "fs.read", Args: map[string]any{"path": "/data/safe/report.txt"}}
	deny := policy.Request{Tool: "http.request", Args: map[string]any{"method": "GET", "url": "https://api.example.com/v1/items"}}
	b.ReportAllocs()
	// The machine a benchmark runs on may be busy: cpu-ns/op (this
	// process's CPU time, GC included) does not count time spent waiting.
	cpu0 := cpuTime(b)
	n := 0
	defer func() { b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(n), "cpu-ns/op") }()
	for i := 0; b.Loop(); i++ {
		n++
		req, want := allow, true
		if i%2 == 1 {
			req, want = deny, false
		}
		if err := d.Decide(req); (err == nil) != want {
			b.Fatalf("Decide(%v) = %v", req, err)
		}
	}
}

// cpuTime is the user and system CPU time of this process.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
