// Command bench is the HTTP serve-mode load benchmark (`make bench`). It
// compares a one-node workflow route served by kiln, with the audit log a
// user gets by default (text, level info, redacting) written to a real
// file, against a bare net/http handler that does the same request work:
// it decodes the same JSON body and writes the same reply.
//
// Both servers listen on 127.0.0.1 in this process. Two load generators
// drive them in alternating rounds (bare, kiln, bare, kiln, ...): the
// in-process Go generator (a fixed count of requests) and, when it is
// installed, wrk (a fixed duration). Each round prints its throughput;
// the summary is the median kiln/bare ratio of the paired rounds with its
// min and max, never the best round: machine noise comes in bursts, and
// only a median over alternating rounds is fair to both targets.
//
// It exits 1 on any failed request, and 2 when wrk is missing under
// CI=true (outside CI a missing wrk is reported and its rounds skipped).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/capabilities/control"
	khttp "github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	body  = `{"event":"ping","n":1}`
	reply = `{"ok":true,"event":"ping"}`
	// target is the throughput ratio kiln/bare the issue asks for.
	target = 0.9
)

func main() {
	requests := flag.Int("requests", 10000, "requests per round of the Go generator")
	concurrency := flag.Int("concurrency", 64, "concurrent clients (Go generator) and connections (wrk)")
	rounds := flag.Int("rounds", 5, "rounds per target and generator (at least 5)")
	wrkDuration := flag.Duration("wrk-duration", 3*time.Second, "length of one wrk round")
	wrkPath := flag.String("wrk", "wrk", "wrk command (looked up in PATH)")
	auditLog := flag.String("audit-log", "", "file kiln's audit log is appended to (default: a file in a temporary folder, removed at exit)")
	quiet := flag.Bool("quiet", false, "serve kiln with the audit log off (for comparison; not the default a user gets)")
	only := flag.String("only", "", "drive only this target (bare or kiln), e.g. with -cpuprofile")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured rounds to this file (with -only and wrk, of the server alone)")
	flag.Parse()
	if *rounds < 5 {
		fail("-rounds %d: at least 5, so the median means something", *rounds)
	}
	if err := run(*requests, *concurrency, *rounds, *wrkDuration, *wrkPath, *auditLog, *quiet, *only, *cpuprofile); err != nil {
		var ce codeError
		if errors.As(err, &ce) {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(ce.code)
		}
		fail("%v", err)
	}
}

type codeError struct {
	code int
	err  error
}

func (e codeError) Error() string { return e.err.Error() }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

func run(requests, concurrency, rounds int, wrkDuration time.Duration, wrkPath, auditLog string, quiet bool, only, cpuprofile string) error {
	tmp, err := os.MkdirTemp("", "kiln-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if auditLog == "" {
		auditLog = filepath.Join(tmp, "audit.log")
	}
	kilnURL, stopKiln, err := serveKiln(auditLog, quiet)
	if err != nil {
		return err
	}
	defer stopKiln()
	bareURL, stopBare, err := serveBare()
	if err != nil {
		return err
	}
	defer stopBare()
	targets := []struct{ name, url string }{{"bare", bareURL}, {"kiln", kilnURL}}
	if only != "" {
		targets = slices.DeleteFunc(targets, func(t struct{ name, url string }) bool { return t.name != only })
		if len(targets) == 0 {
			return fmt.Errorf("-only %q: want bare or kiln", only)
		}
	}
	log := "audit log off (-quiet)"
	if !quiet {
		log = "kiln's default audit log (text, info) appended to " + auditLog
	}
	fmt.Printf("HTTP serve: kiln one-node route vs a bare net/http handler decoding the same JSON, 127.0.0.1, concurrency %d, %s\n", concurrency, log)

	// Warm both up (connections, allocator, the kiln route's first run).
	for _, t := range targets {
		if r := load(t.url, 1000, concurrency); r.errors > 0 {
			return fmt.Errorf("warm-up of %s: %d failed requests", t.name, r.errors)
		}
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("\nGo generator (in process): %d requests per round, rounds alternate bare and kiln\n", requests)
	goRes, goCPU := map[string][]float64{}, map[string][]float64{}
	failed := int64(0)
	for i := 1; i <= rounds; i++ {
		for _, t := range targets {
			r := load(t.url, requests, concurrency)
			failed += r.errors
			goRes[t.name] = append(goRes[t.name], r.rps)
			// CPU per request inverted, so the ratio reads like throughput.
			goCPU[t.name] = append(goCPU[t.name], float64(r.n)/r.cpu.Seconds())
			fmt.Printf("  round %d %-4s %s\n", i, t.name, r)
		}
	}
	summary("Go generator", goRes)
	// Throughput on a shared machine follows whatever else runs; CPU per
	// request (generator included) is steadier: the inverse ratio is the
	// throughput ratio the two would have alone on these cores.
	summary("Go generator, by CPU per request", goCPU)

	wrk, err := exec.LookPath(wrkPath)
	if err != nil {
		if os.Getenv("CI") == "true" {
			return codeError{2, fmt.Errorf("wrk not found (%v): CI=true needs it (make bench installs Debian's wrk)", err)}
		}
		fmt.Printf("\nwrk: SKIPPED, not found (%v); make tools installs Debian's wrk\n", err)
	} else {
		script := filepath.Join(tmp, "post.lua")
		lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", body)
		if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
			return err
		}
		fmt.Printf("\nwrk (2 threads, %d connections, %v per round), rounds alternate bare and kiln\n", concurrency, wrkDuration)
		wrkRes, wrkCPU := map[string][]float64{}, map[string][]float64{}
		for i := 1; i <= rounds; i++ {
			for _, t := range targets {
				cpu0 := processCPU()
				r, err := runWrk(wrk, script, t.url, concurrency, wrkDuration)
				if err != nil {
					return fmt.Errorf("wrk round %d %s: %w", i, t.name, err)
				}
				// wrk is another process: this one's CPU is the server's alone.
				cpu := processCPU() - cpu0
				failed += r.errors
				wrkRes[t.name] = append(wrkRes[t.name], r.rps)
				wrkCPU[t.name] = append(wrkCPU[t.name], float64(r.n)/cpu.Seconds())
				fmt.Printf("  round %d %-4s %8.0f req/s  %5.1f µs server CPU/req  errors %d\n",
					i, t.name, r.rps, float64(cpu.Nanoseconds())/1000/float64(r.n), r.errors)
			}
		}
		summary("wrk", wrkRes)
		summary("wrk, by server CPU per request", wrkCPU)
	}
	if failed > 0 {
		return fmt.Errorf("%d failed requests", failed)
	}
	return nil
}

// summary prints the kiln/bare ratio of each pair of rounds and their
// median, min and max.
func summary(generator string, res map[string][]float64) {
	bare, kiln := res["bare"], res["kiln"]
	if len(bare) == 0 || len(kiln) == 0 {
		return
	}
	ratios := make([]float64, len(bare))
	for i := range bare {
		ratios[i] = kiln[i] / bare[i]
	}
	med, lo, hi := MedianMinMax(ratios)
	verdict := "meets"
	if med < target {
		verdict = "BELOW"
	}
	rs := make([]string, len(ratios))
	for i, r := range ratios {
		rs[i] = strconv.FormatFloat(r, 'f', 2, 64)
	}
	bm, _, _ := MedianMinMax(bare)
	km, _, _ := MedianMinMax(kiln)
	fmt.Printf("  %s: median bare %.0f, kiln %.0f req/s; ratio kiln/bare per round [%s]: median %.2f (min %.2f, max %.2f), %s the %.1f target\n",
		generator, bm, km, strings.Join(rs, " "), med, lo, hi, verdict, target)
}

// MedianMinMax returns the median (the mean of the middle two for an
// even count), min and max of xs.
func MedianMinMax(xs []float64) (med, lo, hi float64) {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// serveKiln serves a workflow whose route runs one respond node, with the
// audit logger a user gets by default (text, info, redacting; target
// file:auditLog, as [logging] target = "file:..." sets it).
func serveKiln(auditLog string, quiet bool) (string, func(), error) {
	// As a sealed binary does, register the one kind the workflow uses
	// (a build that registers every kind at start-up already has it).
	if _, ok := runtime.LookupNode(control.KindRespond.Kind); !ok {
		runtime.RegisterNode(control.KindRespond)
	}
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
	audit, closeLog, err := runtime.NewAuditLogger(runtime.AuditOptions{Target: "file:" + auditLog, Disabled: quiet})
	if err != nil {
		return "", nil, err
	}
	s, err := khttp.New(&runtime.Host{Program: p, Engine: &runtime.Engine{Audit: audit}}, khttp.Config{})
	if err != nil {
		closeLog.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeLog.Close()
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ctx, ln) }()
	return "http://" + ln.Addr().String() + "/hook", func() { cancel(); <-done; closeLog.Close() }, nil
}

// serveBare is the baseline: net/http with kiln's timeouts and body limit,
// decoding the JSON body into a map as kiln does and answering with the
// same reply.
func serveBare() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var in map[string]any
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, khttp.MaxBodyBytes)).Decode(&in); err != nil {
				http.Error(w, "bad body", http.StatusBadRequest)
				return
			}
			event, _ := in["event"].(string)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true,"event":"`+event+`"}`)
		}),
	}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/hook", func() { _ = srv.Close() }, nil
}

type result struct {
	rps      float64
	p50, p99 time.Duration
	errors   int64
	n        int
	cpu      time.Duration // process CPU time (user + system), generator included
	mallocs  uint64        // heap objects allocated, generator included
	bytes    uint64        // heap bytes allocated, generator included
}

func (r result) String() string {
	return fmt.Sprintf("%8.0f req/s  p50 %-9v p99 %-9v  %5.1f µs CPU/req  %4.0f allocs/req  %5.0f B/req  errors %d",
		r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond),
		float64(r.cpu.Nanoseconds())/1000/float64(r.n), float64(r.mallocs)/float64(r.n), float64(r.bytes)/float64(r.n), r.errors)
}

// load sends n POSTs from c workers over keep-alive connections, each
// bounded by a 30 s client timeout.
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
	for range c {
		wg.Go(func() {
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
				if err != nil || res.StatusCode != 200 || string(b) != reply {
					errs.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(begin), processCPU()-cpu0
	goruntime.ReadMemStats(&mem1)
	slices.Sort(lat)
	return result{rps: float64(n) / elapsed.Seconds(), p50: lat[n/2], p99: lat[n*99/100], errors: errs.Load(),
		n: n, cpu: cpu, mallocs: mem1.Mallocs - mem0.Mallocs, bytes: mem1.TotalAlloc - mem0.TotalAlloc}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var (
	wrkRPS    = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkCount  = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in `)
	wrkNon2xx = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+([0-9]+)`)
	wrkSocket = regexp.MustCompile(`(?m)^\s*Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
)

// runWrk drives url with wrk for d (and kills it 30 s after that) and
// reads its throughput and error counts.
func runWrk(wrk, script, url string, c int, d time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	secs := max(1, int(d.Round(time.Second)/time.Second))
	out, err := exec.CommandContext(ctx, wrk, "-t2", "-c"+strconv.Itoa(c), "-d"+strconv.Itoa(secs)+"s",
		"--timeout", "10s", "-s", script, url).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("%v\n%s", err, out)
	}
	return parseWrk(string(out))
}

// parseWrk reads wrk's summary: requests per second, and non-2xx replies
// plus socket errors as errors.
func parseWrk(out string) (result, error) {
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("no Requests/sec in wrk's output:\n%s", out)
	}
	rps, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return result{}, err
	}
	m = wrkCount.FindStringSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("no request count in wrk's output:\n%s", out)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n == 0 {
		return result{}, fmt.Errorf("wrk sent no requests:\n%s", out)
	}
	var errs int64
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		errs += n
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			errs += n
		}
	}
	return result{rps: rps, n: n, errors: errs}, nil
}
