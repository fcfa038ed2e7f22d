package pgstate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
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
	const lease = 3 * time.Second // the 409 below must come before it runs out, on a loaded machine too
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

// TestFleetSurvivesADatabaseOutage: PostgreSQL stops under load and
// starts again. Deliveries meanwhile are answered 503 (never run
// unguarded, never 500); every delivery answered 200 ran exactly once and
// is replayed after the outage (its reply was committed); the replicas
// recover without a restart.
func TestFleetSurvivesADatabaseOutage(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cluster := pgtest.Running(t)
	runLog := filepath.Join(t.TempDir(), "runs.log")
	// The lease bounds how long a finished run waits for the database to
	// record its reply; the outage below ends well within it.
	const lease = 30 * time.Second
	fleet := []*replica{
		startReplica(t, dsn, runLog, "r0", lease, false),
		startReplica(t, dsn, runLog, "r1", lease, false),
	}
	client := &http.Client{Timeout: 2 * lease, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	var mu sync.Mutex
	answers := map[string]int{} // key -> status of its one delivery
	seen := map[int]int{}       // status -> deliveries answered so
	count := func(code int) int { mu.Lock(); defer mu.Unlock(); return seen[code] }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// A new delivery every 10 ms, each in its own goroutine (at most 64 in
	// flight): the deliveries whose runs wait for the database to record
	// their replies do not hold up new ones, which must be refused.
	wg.Go(func() {
		inFlight := make(chan struct{}, 64)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case inFlight <- struct{}{}:
			}
			key := fmt.Sprint("d", n)
			wg.Go(func() {
				defer func() { <-inFlight }()
				code, _, err := post(client, fleet[n%2].URL, key)
				if err != nil {
					t.Errorf("%s: %v", key, err)
					return
				}
				mu.Lock()
				answers[key] = code
				seen[code]++
				mu.Unlock()
			})
			time.Sleep(10 * time.Millisecond)
		}
	})
	// waitFor polls until cond holds; the bound is far above the store's
	// 5 s query timeout, so a loaded machine only makes it slower (and
	// stays within the lease).
	waitFor := func(what string, cond func() bool) time.Duration {
		start := time.Now()
		for !cond() {
			if time.Since(start) > lease/2 {
				close(stop)
				wg.Wait()
				t.Fatalf("%s: not within %v (answers so far by status: %v)", what, lease/2, seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitFor("deliveries answered 200 before the outage", func() bool { return count(200) >= 50 })
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = cluster.Start()
		}
	}()
	// The outage lasts until deliveries are being refused, however long a
	// loaded machine takes to notice, and a little longer.
	firstRefusal := waitFor("a delivery answered 503 while the database is down", func() bool { return count(503) > 0 })
	time.Sleep(500 * time.Millisecond)
	okBefore := count(200)
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	recovered := waitFor("deliveries answered 200 again after the restart", func() bool { return count(200) >= okBefore+20 })
	close(stop)
	wg.Wait()
	t.Logf("first 503 %v after the stop; 20 more runs answered 200 %v after the restart", firstRefusal, recovered)

	runs := map[string]int{}
	for _, line := range readRunLog(t, runLog) {
		if f := strings.Fields(line); len(f) == 3 {
			runs[f[1]]++
		}
	}
	var ok, unavailable int
	for key, code := range answers {
		switch code {
		case 200:
			ok++
			if runs[key] != 1 {
				t.Errorf("%s answered 200 but ran %d times", key, runs[key])
			}
			// Committed before the answer: replayed after the outage, on
			// either replica.
			if c, replay, err := post(client, fleet[1].URL, key); err != nil || c != 200 || !replay {
				t.Errorf("%s after the outage: %d replay=%v %v", key, c, replay, err)
			}
		case 503:
			unavailable++
			if runs[key] != 0 {
				t.Errorf("%s answered 503 but ran %d times", key, runs[key])
			}
		default:
			t.Errorf("%s answered %d, want 200 or 503", key, code)
		}
	}
	if unavailable == 0 || ok == 0 {
		t.Fatalf("%d answered 200 and %d 503: the outage did not fall under load", ok, unavailable)
	}
	// Recovered without restart: both replicas run new keys again.
	for i, r := range fleet {
		if c, _, err := post(client, r.URL, fmt.Sprint("after-", i)); err != nil || c != 200 {
			t.Errorf("replica %d after the outage: %d %v", i, c, err)
		}
	}
	t.Logf("%d deliveries: %d answered 200, %d answered 503 while the database was away", len(answers), ok, unavailable)
}

// TestFleetFiresEachTickOnce: three replicas run the same interval
// trigger (every second) against one database: each tick fires on exactly
// one replica, and the ticks keep coming.
func TestFleetFiresEachTickOnce(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	runLog := filepath.Join(t.TempDir(), "runs.log")
	var fleet []*replica
	for i := range 3 {
		fleet = append(fleet, startReplica(t, dsn, runLog, fmt.Sprint("r", i), 5*time.Second, false, replicaTicksEnv+"=1"))
	}
	ticks := func() map[string][]string {
		slots := map[string][]string{} // slot -> replicas that fired it
		for _, line := range readRunLog(t, runLog) {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue // the file was created, its first line not written yet
			}
			if len(f) != 3 || f[0] != "tick" {
				t.Fatalf("run log line %q", line)
			}
			slots[f[1]] = append(slots[f[1]], f[2])
		}
		return slots
	}
	// Event-driven: wait for the ticks themselves, generously (a loaded
	// machine may start the replicas late).
	waitFor(t, 2*time.Minute, "five ticks", func() bool { return len(ticks()) >= 5 })
	for _, r := range fleet {
		r.stop()
	}
	slots := ticks()
	for slot, by := range slots {
		if len(by) != 1 {
			t.Errorf("tick %s fired %d times: %v", slot, len(by), by)
		}
	}
	if len(slots) < 5 {
		t.Fatalf("%d ticks, want at least 5", len(slots))
	}
	t.Logf("%d ticks, each fired once in the fleet", len(slots))
}

// TestFleetContinuesACutAsyncRun: an async run accepted by a replica
// whose drain runs out before the run ends is not dropped. Its record says
// interrupted and its checkpoint stays in the shared database; another
// replica that starts on the same database continues it and records how
// it ended, and the status is the same read through either.
func TestFleetContinuesACutAsyncRun(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	runLog := filepath.Join(t.TempDir(), "runs.log")
	a := startReplica(t, dsn, runLog, "r0", 5*time.Second, true) // its runs block until cut
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	resp, err := client.Post(a.URL+"/async", "application/json", strings.NewReader(`{"id":"cut-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var acc struct {
		ID string `json:"execution_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 202 || acc.ID == "" {
		t.Fatalf("accept: %d %+v %v", resp.StatusCode, acc, err)
	}
	waitLine := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(readRunLog(t, runLog), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the run log: %q", want, readRunLog(t, runLog))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLine("start cut-1")
	a.stop() // drain of 1 s runs out: the run is cut

	b := startReplica(t, dsn, runLog, "r1", 5*time.Second, false)
	waitLine("run cut-1 r1")
	var st struct {
		State   string `json:"state"`
		Outcome struct {
			Status int `json:"http_status"`
			Body   struct {
				Status string         `json:"status"`
				Final  map[string]any `json:"final_value"`
			} `json:"body"`
		} `json:"outcome"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for st.State != "ended" {
		if time.Now().After(deadline) {
			t.Fatalf("run %s not ended on the second replica: %+v", acc.ID, st)
		}
		time.Sleep(20 * time.Millisecond)
		resp, err := client.Get(b.URL + "/v1/runs/" + acc.ID)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status: %d %v", resp.StatusCode, err)
		}
	}
	if st.Outcome.Status != 200 || st.Outcome.Body.Status != "completed" || st.Outcome.Body.Final["id"] != "cut-1" {
		t.Fatalf("resumed run's outcome: %+v", st)
	}
	if n := strings.Count(strings.Join(readRunLog(t, runLog), "\n"), "run cut-1"); n != 1 {
		t.Fatalf("the run ended %d times", n)
	}
}
