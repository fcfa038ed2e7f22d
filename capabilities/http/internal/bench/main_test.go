package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKilnReplyFollowsItsAuditLines is serve mode's durability promise on
// a real loopback server with the default audit log to a file: when a
// reply arrives, both lines of its run (workflow.started and
// workflow.completed) are already in the file.
func TestKilnReplyFollowsItsAuditLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	url, stop, err := serveKiln(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for i := 1; i <= 20; i++ {
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || string(got) != reply {
			t.Fatalf("reply %d: %d %q (%v)", i, res.StatusCode, got, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		started := bytes.Count(data, []byte("msg=workflow.started "))
		completed := bytes.Count(data, []byte("msg=workflow.completed "))
		if started != i || completed != i {
			t.Fatalf("after reply %d the audit file holds %d started and %d completed lines:\n%s", i, started, completed, data)
		}
	}
}

// TestBareMatchesKiln: the baseline answers the same request with the
// same reply, and refuses a body that is not JSON as kiln does.
func TestBareMatchesKiln(t *testing.T) {
	url, stop, err := serveBare()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if r := load(url, 50, 4); r.errors != 0 {
		t.Fatalf("%d failed requests", r.errors)
	}
	res, err := http.Post(url, "application/json", strings.NewReader(`{"event":`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("truncated JSON: %d, want 400", res.StatusCode)
	}
}

func TestMedianMinMax(t *testing.T) {
	for _, c := range []struct {
		in          []float64
		med, lo, hi float64
	}{
		{[]float64{0.9, 0.7, 1.1, 0.8, 1.0}, 0.9, 0.7, 1.1},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	} {
		med, lo, hi := MedianMinMax(c.in)
		if med != c.med || lo != c.lo || hi != c.hi {
			t.Errorf("%v: %v %v %v", c.in, med, lo, hi)
		}
	}
}

func TestParseWrk(t *testing.T) {
	out := `Running 3s test @ http://127.0.0.1:40000/hook
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.61ms    2.04ms  30.12ms   80.00%
    Req/Sec     7.01k   600.00     8.00k    70.00%
  41880 requests in 3.00s, 5.71MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  13959.87
Transfer/sec:      1.90MB
`
	r, err := parseWrk(out)
	if err != nil || r.rps != 13959.87 || r.n != 41880 || r.errors != 7 {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := parseWrk("unable to connect"); err == nil {
		t.Fatal("output without a rate parsed")
	}
}
