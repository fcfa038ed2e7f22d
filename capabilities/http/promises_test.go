package http

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The housekeeping sweep runs when a server starts, not only when it is
// called: a state directory left by an earlier server, with an expired
// reply, the lock file of a key that never got a reply and a claim another
// live process holds, is cleaned by starting a server over it, before its
// first request is answered. The live reply and the held claim stay.
func TestServerStartSweepsTheIdempotencyStore(t *testing.T) {
	stateDir := t.TempDir()
	earlier := time.Now().Add(-2 * time.Hour)
	old := newIdemStore(stateDir, func() time.Time { return earlier })
	reply := func(key string, ttl time.Duration) string {
		if claim, _, _, err := old.begin("POST /hook", key); err != nil || claim != claimRun {
			t.Fatalf("claim %s: %d %v", key, claim, err)
		}
		if err := old.finish("POST /hook", key, ttl, 200, "application/json", []byte(`{"recorded":true}`)); err != nil {
			t.Fatal(err)
		}
		return old.file("POST /hook", key)
	}
	expired := reply("s:expired", time.Hour) // expired an hour ago
	live := reply("s:live", 24*time.Hour)
	orphan := lockFile(old.file("POST /hook", "s:abandoned"))
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	busy := old.file("POST /hook", "s:busy")
	writeMarker(t, busy, earlier)
	holdLock(t, lockFile(busy))

	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, p := range []string{expired, lockFile(expired), orphan, live, busy} {
		if !exists(p) {
			t.Fatalf("setup: %s missing", filepath.Base(p))
		}
	}

	ts := start(t, redactWF("json"), setup{stateDir: stateDir})
	// Any answer means ServeListener is serving, so its sweep has run.
	if r := ts.do(t, "POST", "/hook", `{"id":"live","echo":"x"}`).expect(t, 200); r.header.Get("X-Idempotent-Replay") != "true" || r.body != `{"recorded":true}` {
		t.Fatalf("the live reply was not replayed: %v %s", r.header, r.body)
	}
	for p, want := range map[string]bool{
		expired: false, lockFile(expired): false, orphan: false,
		live: true, busy: true, lockFile(busy): true,
	} {
		if exists(p) != want {
			t.Errorf("after start-up: %s exists = %v, want %v", filepath.Base(p), !want, want)
		}
	}
}
