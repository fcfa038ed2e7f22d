// Command bench is the HTTP serve-mode load benchmark (`make bench`): it
// drives the same number of requests at the same concurrency against a
// one-node workflow route served by kiln and against a bare net/http
// handler in the same process, and reports throughput, the kiln/bare
// ratio (target >= 0.8), p50/p99 latency and errors, plus the process's
// CPU time and heap allocations per request while each target was under
// load (load generator included, so kiln minus bare is what kiln adds).
// It exits 1 on any error. kiln runs with the audit logging a user gets
// by default (text, level info, redacting: every run logs
// workflow.started and workflow.completed), writing to -audit-log.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	khttp "github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"

	_ "github.com/kilnworks/kiln/capabilities/control"
)

const body = `{"event":"ping","n":1}`

func main() {
	requests := flag.Int("requests", 10000, "requests per target")
	concurrency := flag.Int("concurrency", 64, "concurrent clients")
	// Machine noise only ever slows a round down, and on a small shared
	// machine it comes in bursts of a second or more: six rounds give each
	// target a quiet one (best-of-3 left about one run in eight ≥ 0.05 low).
	rounds := flag.Int("rounds", 6, "measured rounds per target (best kept)")
	slices := flag.Int("slices", 5, "interleaved slices per round")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured rounds to this file")
	auditLog := flag.String("audit-log", os.DevNull, "file kiln's audit log is written to (appended)")
	flag.Parse()

	kilnURL, stopKiln, err := serveKiln(*auditLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer stopKiln()
	bareURL, stopBare, err := serveBare()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer stopBare()

	// Warm both up (connections, allocator), then interleave slices of
	// the load so a burst of machine noise hits both targets alike.
	load(bareURL, 1000, *concurrency)
	load(kilnURL, 1000, *concurrency)
	if *cpuprofile != "" {
		if f, err := os.Create(*cpuprofile); err == nil {
			_ = pprof.StartCPUProfile(f)
		}
	}
	var bare, kiln result
	for i := 0; i < *rounds; i++ {
		var b, k []result
		for j := 0; j < *slices; j++ {
			b = append(b, load(bareURL, *requests / *slices, *concurrency))
			k = append(k, load(kilnURL, *requests / *slices, *concurrency))
		}
		bare, kiln = best(bare, merge(b)), best(kiln, merge(k))
	}
	pprof.StopCPUProfile()
	fmt.Printf("HTTP load: %d requests per target, concurrency %d, %d interleaved slices, best of %d rounds, one process, kiln audit log to %s\n",
		*requests, *concurrency, *slices, *rounds, *auditLog)
	fmt.Printf("  %-30s %s\n", "bare net/http handler", bare)
	fmt.Printf("  %-30s %s\n", "kiln one-node workflow route", kiln)
	ratio := kiln.rps / bare.rps
	verdict := "meets"
	if ratio < 0.8 {
		verdict = "BELOW"
	}
	fmt.Printf("  throughput ratio kiln/bare: %.2f (%s the 0.8 target)\n", ratio, verdict)
	fmt.Printf("  per request, whole process: bare %.1f µs CPU, %.0f allocs, %.0f B; kiln %.1f µs CPU, %.0f allocs, %.0f B\n",
		bare.cpuPerReq(), bare.perReq(bare.mallocs), bare.perReq(bare.bytes),
		kiln.cpuPerReq(), kiln.perReq(kiln.mallocs), kiln.perReq(kiln.bytes))
	if bare.errors+kiln.errors > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d errors\n", bare.errors+kiln.errors)
		os.Exit(1)
	}
}

// serveKiln serves a workflow whose route runs one respond node. Its audit
// logger is the default one (target stderr), with the file at auditLog
// standing in for stderr: every event is formatted and written with its own
// write(2), as to a terminal or pipe, without flooding the terminal.
func serveKiln(auditLog string) (string, func(), error) {
	wf := &workflow.Workflow{
		Name:       "bench",
		StartNodes: []workflow.StartNode{{Name: "main", Source: "http"}},
		Nodes: []workflow.Node{{ID: "ok", Type: "respond", InputFrom: "trigger",
			BodyTemplate: `{"ok":true,"event":"{{event}}"}`}},
		HTTPRoutes: []workflow.HTTPRoute{{Method: "POST", Path: "/hook", StartNode: "main"}},
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		return "", nil, err
	}
	logFile, err := os.OpenFile(auditLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", nil, err
	}
	closeLog := func() { logFile.Close() }
	audit, _, err := runtime.NewAuditLogger(runtime.AuditOptions{Stderr: logFile})
	if err != nil {
		closeLog()
		return "", nil, err
	}
	s, err := khttp.New(&runtime.Host{Program: p, Engine: &runtime.Engine{Audit: audit}}, khttp.Config{})
	if err != nil {
		closeLog()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeLog()
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ctx, ln) }()
	return "http://" + ln.Addr().String() + "/hook", func() { cancel(); <-done; closeLog() }, nil
}

// serveBare is the baseline: net/http with the same timeouts, reading
// the body and answering a small JSON document.
func serveBare() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true,"event":"ping"}`)
		}),
	}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/hook", func() { _ = srv.Close() }, nil
}

type result struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64

	n       int
	elapsed time.Duration
	lat     []time.Duration
	cpu     time.Duration // process CPU time (user + system)
	mallocs uint64        // heap objects allocated
	bytes   uint64        // heap bytes allocated
}

func (r result) perReq(v uint64) float64 { return float64(v) / float64(r.n) }

func (r result) cpuPerReq() float64 { return float64(r.cpu.Microseconds()) / float64(r.n) }

// merge combines interleaved slices into one result.
func merge(parts []result) result {
	var m result
	for _, p := range parts {
		m.n += p.n
		m.elapsed += p.elapsed
		m.errors += p.errors
		m.cpu += p.cpu
		m.mallocs += p.mallocs
		m.bytes += p.bytes
		m.lat = append(m.lat, p.lat...)
	}
	sort.Slice(m.lat, func(i, j int) bool { return m.lat[i] < m.lat[j] })
	m.rps = float64(m.n) / m.elapsed.Seconds()
	m.p50, m.p99 = m.lat[len(m.lat)/2], m.lat[len(m.lat)*99/100]
	return m
}

func (r result) String() string {
	return fmt.Sprintf("%8.0f req/s  p50 %-9v p99 %-9v errors %d", r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.errors)
}

func best(a, b result) result {
	if b.rps > a.rps {
		return b
	}
	return a
}

// load sends n POSTs from c workers over keep-alive connections.
func load(url string, n, c int) result {
	tr := &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var next, errs atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mem0, mem1 goruntime.MemStats
	goruntime.ReadMemStats(&mem0)
	cpu0 := processCPU()
	begin := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				res, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					errs.Add(1)
					continue
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != 200 || !strings.HasPrefix(string(b), `{"ok":true`) {
					errs.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(begin), processCPU()-cpu0
	goruntime.ReadMemStats(&mem1)
	return result{n: n, elapsed: elapsed, lat: lat, errors: errs.Load(), cpu: cpu,
		mallocs: mem1.Mallocs - mem0.Mallocs, bytes: mem1.TotalAlloc - mem0.TotalAlloc}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
