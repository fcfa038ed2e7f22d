package pgstate

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	khttp "github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/capabilities/pgstate/pgtest"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
)

// TestFigures measures one replica's keyed-route throughput and p99 with
// the file backend and with PostgreSQL (every request a new key: claim,
// run, record). A measurement, not a check: it runs only with
// KILN_PGSTATE_FIGURES=1.
func TestFigures(t *testing.T) {
	if os.Getenv("KILN_PGSTATE_FIGURES") != "1" {
		t.Skip("measurement: set KILN_PGSTATE_FIGURES=1")
	}
	nodeDelay = 0
	t.Setenv(replicaLogEnv, filepath.Join(t.TempDir(), "runs.log"))
	for round := range 3 {
		for _, backend := range []string{"file", "postgres"} {
			h := figureHost(t, backend)
			rps, p50, p99 := load(t, h, fmt.Sprint(backend, round), 3000, 16)
			t.Logf("round %d %-8s %7.0f req/s  p50 %v  p99 %v", round, backend, rps, p50, p99)
		}
	}
}

func figureHost(t *testing.T, backend string) *runtime.Host {
	t.Helper()
	wf, err := gen.Decode("workflow.toml", []byte(replicaWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &runtime.Host{Program: p, Engine: &runtime.Engine{Services: &runtime.Services{}}}
	if backend == "file" {
		h.Engine.StateDir = t.TempDir()
	} else {
		runtime.SetClaimStore(h.Engine.Services, open(t, pgtest.NewDatabase(t), 30*time.Second))
	}
	return h
}

func load(t *testing.T, h *runtime.Host, prefix string, n, workers int) (rps float64, p50, p99 time.Duration) {
	t.Helper()
	s, err := khttp.New(h, khttp.Config{RunTimeout: 30 * time.Second, DrainTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ctx, ln) }()
	defer func() { cancel(); <-done }()
	url := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()

	lat := make([]time.Duration, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				code, _, err := post(client, url, fmt.Sprint(prefix, "-", i))
				lat[i] = time.Since(t0)
				if err != nil || code != 200 {
					t.Errorf("request %d: %d %v", i, code, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat[n/2], lat[n*99/100]
}
