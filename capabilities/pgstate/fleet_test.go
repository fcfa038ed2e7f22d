package pgstate

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/pgstate/pgtest"
)

type delivery struct {
	key, replica string
	code         int
	replay       bool
	err          error
}

func post(c *http.Client, url, id string) (code int, replay bool, err error) {
	resp, err := c.Post(url+"/hook", "application/json", strings.NewReader(`{"id":"`+id+`"}`))
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Idempotent-Replay") == "true", nil
}

// TestFleetRunsEachKeyOnce: three replica processes share one database.
// 300 webhook deliveries, 100 distinct keys each delivered three times to
// different replicas at once: exactly 100 runs, one per key, and every
// duplicate is answered 409 or replayed.
func TestFleetRunsEachKeyOnce(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	runLog := filepath.Join(t.TempDir(), "runs.log")
	var fleet []*replica
	for i := range 3 {
		fleet = append(fleet, startReplica(t, dsn, runLog, fmt.Sprint("r", i), 5*time.Second, false))
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	start := time.Now()
	results := make(chan delivery, 300)
	sem := make(chan struct{}, 48)
	var wg sync.WaitGroup
	for k := range 100 {
		key := fmt.Sprint("order-", k)
		for i, r := range fleet {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				code, replay, err := post(client, r.URL, key)
				results <- delivery{key: key, replica: fmt.Sprint("r", i), code: code, replay: replay, err: err}
			})
		}
	}
	wg.Wait()
	close(results)
	elapsed := time.Since(start)

	ran := map[string]int{} // key -> fresh 200 answers
	var conflicts, replays int
	for d := range results {
		switch {
		case d.err != nil:
			t.Errorf("%s to %s: %v", d.key, d.replica, d.err)
		case d.code == 200 && !d.replay:
			ran[d.key]++
		case d.code == 200 && d.replay:
			replays++
		case d.code == 409:
			conflicts++
		default:
			t.Errorf("%s to %s: status %d", d.key, d.replica, d.code)
		}
	}
	runs := readRunLog(t, runLog)
	perKey := map[string]int{}
	for _, line := range runs {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "run" {
			t.Fatalf("run log line %q", line)
		}
		perKey[f[1]]++
	}
	if len(runs) != 100 || len(perKey) != 100 {
		t.Fatalf("%d runs over %d keys, want exactly 100 over 100", len(runs), len(perKey))
	}
	for k, n := range perKey {
		if n != 1 || ran[k] != 1 {
			t.Errorf("key %s ran %d times, answered fresh %d times", k, n, ran[k])
		}
	}
	if conflicts+replays != 200 {
		t.Errorf("%d duplicates answered 409 and %d replayed, want 200 in all", conflicts, replays)
	}
	if elapsed > 60*time.Second {
		t.Errorf("300 deliveries took %v", elapsed)
	}
	t.Logf("300 deliveries in %v: 100 runs, %d answered 409, %d replayed", elapsed, conflicts, replays)
}

// TestFleetTakesOverADeadReplicasClaim: a replica SIGKILLed while its run
// holds a key's claim leaves the key refused (409) on the others until
// the lease runs out; then another replica runs it, once, and replays it
// after.
func TestFleetTakesOverADeadReplicasClaim(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	runLog := filepath.Join(t.TempDir(), "runs.log")
	const lease = 2 * time.Second
	a := startReplica(t, dsn, runLog, "a", lease, true)
	b := startReplica(t, dsn, runLog, "b", lease, false)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	go func() { _, _, _ = post(client, a.URL, "crash") }() // a's run blocks: it holds the claim
	deadline := time.Now().Add(30 * time.Second)
	for len(readRunLog(t, runLog)) == 0 || readRunLog(t, runLog)[0] != "start crash" {
		if time.Now().After(deadline) {
			t.Fatal("a never started the run")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.kill()
	killed := time.Now()

	if code, _, err := post(client, b.URL, "crash"); err != nil || code != 409 {
		t.Fatalf("within the dead replica's lease: %d %v, want 409", code, err)
	}
	var pickedUp time.Duration
	for {
		code, replay, err := post(client, b.URL, "crash")
		if err != nil {
			t.Fatal(err)
		}
		if code == 200 && !replay {
			pickedUp = time.Since(killed)
			break
		}
		if code != 409 {
			t.Fatalf("status %d while waiting for the lease", code)
		}
		if time.Since(killed) > lease+10*time.Second {
			t.Fatalf("not taken over %v after the kill (lease %v)", time.Since(killed), lease)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pickedUp < lease/2 {
		t.Fatalf("taken over after %v: before the lease (%v) could have run out", pickedUp, lease)
	}
	if code, replay, err := post(client, b.URL, "crash"); err != nil || code != 200 || !replay {
		t.Fatalf("after the takeover: %d replay=%v %v", code, replay, err)
	}
	if got := readRunLog(t, runLog); len(got) != 2 || got[1] != "run crash b" {
		t.Fatalf("run log %q, want a's start and b's one run", got)
	}
	t.Logf("the dead replica's key was picked up %v after SIGKILL (lease %v)", pickedUp, lease)
}
