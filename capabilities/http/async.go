package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	httpspec "github.com/kilnworks/kiln/capabilities/http/spec"
	"github.com/kilnworks/kiln/runtime"
)

// Async routes (reply = "async", docs/serve.md): the request is admitted
// as on any route, its run is recorded as accepted in the run store, the
// caller gets 202 with the run's status URL, and the run goes on in the
// background; GET /v1/runs/{id} reads the record under the route's auth.

// MaxOutcomeBytes bounds the reply kept in a run record; a larger one is
// replaced by a note of its size.
const MaxOutcomeBytes = 1 << 20

// sweepEvery is how often a serving process deletes expired run records
// (readers never see one past its retention either way).
const sweepEvery = 10 * time.Minute

// asyncCode is the code of async routes, of GET /v1/runs and of resuming
// interrupted runs at start. It is set by EnableAsync, so a program that
// does not call it links none of it, nor the run store.
type asyncCode struct {
	route     func(*Server, *route) error
	accept    func(*Server, http.ResponseWriter, *http.Request, *route, admitted) int
	runStatus func(*Server, http.ResponseWriter, *http.Request)
	resume    func(*Server, context.Context)
	location  func(http.ResponseWriter, []byte)
}

var asyncServing *asyncCode

// EnableAsync links async routes (reply = "async"). The generated program
// calls it when its workflow declares one, capabilities/all for kiln run.
func EnableAsync() {
	asyncServing = &asyncCode{
		route:     (*Server).asyncRoute,
		accept:    (*Server).accept,
		runStatus: (*Server).serveRunStatus,
		resume:    (*Server).resumeInterrupted,
		location:  setLocation,
	}
}

// errNoAsync refuses an async route in a program without EnableAsync:
// it is never served as a sync one.
var errNoAsync = errors.New(`reply = "async" is declared, but this binary was built without async route support (http.EnableAsync): build it again with kiln build or go generate`)

// asyncRoute makes rt an async route: it needs a run store (a state
// directory, or a shared state backend), as a keyed route needs a claim
// store.
func (s *Server) asyncRoute(rt *route) error {
	if s.runs == nil {
		s.runs = runtime.RunStoreFor(s.host.Engine)
		if s.runs == nil {
			return errors.New(`reply = "async" needs a state directory (--state-dir) or a shared [state] backend to keep its runs' status`)
		}
	}
	rt.async = true
	rt.keep = runtime.DefaultRunRetention
	if t := rt.spec.RunRetentionSecs; t != nil {
		rt.keep = time.Duration(*t) * time.Second
	}
	return nil
}

// newRunID draws an async run's id: 128 bits from crypto/rand, so a
// caller cannot guess another run's id.
func newRunID() string {
	var b [runtime.RunIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
	return hex.EncodeToString(b[:])
}

// accept records the admitted request's run as accepted, answers 202 and
// starts the run in the background.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, rt *route, a admitted) int {
	key := a.key
	release := func() {
		if key != "" {
			if err := s.idem.abandon(rt.name, key); err != nil {
				s.routeLog(r, rt).Error("http.idempotency_error", "error", err.Error())
			}
		}
	}
	select {
	case s.asyncSlots <- struct{}{}:
	default:
		release()
		w.Header().Set("Retry-After", "1")
		s.routeLog(r, rt).Warn("http.async_full", "limit", cap(s.asyncSlots))
		return writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "too many async runs in flight", "limit": cap(s.asyncSlots)})
	}
	now := s.now()
	rec := runtime.RunRecord{ID: newRunID(), Route: rt.name, State: runtime.RunAccepted, Created: now, Updated: now}
	if err := s.runs.PutRun(context.Background(), rec, rt.keep); err != nil {
		<-s.asyncSlots
		release()
		s.routeLog(r, rt).Error("http.run_store_error", "error", err.Error())
		return writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "run store unavailable"})
	}
	statusURL := httpspec.RunsPath + "/" + rec.ID
	body, err := runtime.EncodeJSON(map[string]any{"execution_id": rec.ID, "status_url": statusURL})
	if err != nil { // two strings: cannot happen
		body = []byte(`{"error":"internal error"}`)
	}
	// A redelivery of the key replays this 202 (same id), whatever the run
	// later does: the caller polls the status URL for that.
	if key != "" {
		if err := s.idem.finish(rt.name, key, rt.ttl, http.StatusAccepted, "application/json", body); err != nil {
			s.routeLog(r, rt).Error("http.idempotency_error", "error", err.Error())
		}
	}
	s.asyncRuns.Add(1)
	go s.runAsync(rt, a, rec, nil)
	w.Header().Set("Location", statusURL)
	return write(w, http.StatusAccepted, "application/json", body)
}

// runAsync runs an accepted request (or continues one a previous process
// accepted, from its checkpoint) and records how it ended. It runs under
// the server's run context: only an expired drain cuts it short. With a
// checkpoint store the run checkpoints after every node, so a cut run is
// recorded as interrupted and its checkpoint stays incomplete, for the
// server's next start to continue (resumeInterrupted); without one it is
// recorded as ended with 503, never left as running.
func (s *Server) runAsync(rt *route, a admitted, rec runtime.RunRecord, resume *runtime.Checkpoint) {
	defer s.asyncRuns.Done()
	defer func() { <-s.asyncSlots }()
	log := s.audit.With("route", rt.name, "execution_id", rec.ID)
	checkpoints := runtime.CheckpointStoreFor(s.host.Engine) != nil
	if resume == nil {
		rec.State = runtime.RunRunning
		s.putRun(rt, rec, log)
	}
	rep := s.host.Fire(runtime.WithTraceparent(s.runCtx, a.tp), runtime.RunOptions{
		Start: rt.spec.StartNode, Trigger: a.trigger, Timeout: s.runTimeout(), ExecutionID: rec.ID,
		Resume: resume, CheckpointEachNode: checkpoints})
	if err := rep.Outcome.Err; resume != nil && err != nil && runtime.TakenElsewhere(err) {
		// Its record is the other process's to write.
		log.Info("http.async_resume_skipped", "detail", runtime.Redact(err.Error()))
		return
	}
	code, ctype, out := reply(rep.Outcome)
	cut := s.runCtx.Err() != nil && rep.Outcome.Status == runtime.StatusErrored
	switch {
	case cut && checkpoints:
		rec.State, rec.Outcome = runtime.RunInterrupted, nil
	case cut:
		code = http.StatusServiceUnavailable
		fallthrough
	default:
		rec.State, rec.Outcome = runtime.RunEnded, storedOutcome(code, ctype, out)
	}
	s.putRun(rt, rec, log)
}

// putRun writes rec, updated now, for the retention of its route; a store
// error goes to the audit log (the run itself has happened either way).
func (s *Server) putRun(rt *route, rec runtime.RunRecord, log *slog.Logger) {
	rec.Updated = s.now()
	if err := s.runs.PutRun(context.Background(), rec, rt.keep); err != nil {
		log.Error("http.run_store_error", "state", rec.State, "error", err.Error())
	}
}

// resumeInterrupted continues, in the background, the async runs of this
// server's routes that an earlier process accepted and did not finish
// (an expired drain cut them, or the process died): each has a run record
// not yet ended and an incomplete checkpoint no process is executing. The
// claim on the checkpoint keeps two replicas from both running one.
func (s *Server) resumeInterrupted(ctx context.Context) {
	store := runtime.CheckpointStoreFor(s.host.Engine)
	if s.runs == nil || store == nil {
		return
	}
	infos, bad, err := store.List(ctx)
	if err != nil {
		s.audit.Error("http.async_resume_error", "error", err.Error())
		return
	}
	for _, err := range bad {
		s.audit.Warn("http.async_resume_error", "error", err.Error())
	}
	for _, in := range infos {
		if in.State != runtime.CheckpointIncomplete || in.Active || !runtime.ValidRunID(in.RunID) {
			continue
		}
		rec, ok, err := s.runs.GetRun(ctx, in.RunID)
		if err != nil || !ok || rec.State == runtime.RunEnded {
			continue // not an async run, or already recorded as ended
		}
		rt := s.asyncRouteNamed(rec.Route)
		if rt == nil {
			continue // another server's route
		}
		log := s.audit.With("route", rt.name, "execution_id", rec.ID)
		if err := s.host.Program.CheckResume(in.Checkpoint); err != nil {
			log.Error("http.async_resume_refused", "error", err.Error())
			rec.State = runtime.RunEnded
			rec.Outcome = storedOutcome(http.StatusInternalServerError, "application/json",
				[]byte(`{"error":"the run could not be resumed by this build"}`))
			s.putRun(rt, rec, log)
			continue
		}
		select {
		case s.asyncSlots <- struct{}{}:
		default:
			log.Warn("http.async_full", "limit", cap(s.asyncSlots), "detail", "left for the next start")
			continue
		}
		log.Info("http.async_resumed", "next_node", in.NextNode)
		rec.State = runtime.RunRunning
		s.asyncRuns.Add(1)
		go s.runAsync(rt, admitted{}, rec, in.Checkpoint)
	}
}

// storedOutcome is a run record's outcome: the reply the route would have
// sent, redacted (the store is a sink, read later by whoever passes the
// route's auth). A JSON body is kept as JSON, any other as a string.
func storedOutcome(code int, ctype string, body []byte) []byte {
	body = runtime.RedactBody(ctype, body)
	o := struct {
		Status      int    `json:"http_status"`
		ContentType string `json:"content_type"`
		Body        any    `json:"body,omitempty"`
		Note        string `json:"note,omitempty"`
	}{Status: code, ContentType: ctype}
	switch {
	case len(body) > MaxOutcomeBytes:
		o.Note = "the reply body was over the 1 MiB a run record keeps"
	case runtime.IsJSONMediaType(ctype) && json.Valid(body):
		o.Body = json.RawMessage(body)
	default:
		o.Body = string(body)
	}
	out, err := json.Marshal(o)
	if err != nil {
		return []byte(`{"note":"the outcome could not be encoded"}`)
	}
	return runtime.RedactJSON(out)
}

// setLocation sets a replayed 202's Location from its body's status_url.
func setLocation(w http.ResponseWriter, body []byte) {
	var v struct {
		StatusURL string `json:"status_url"`
	}
	if json.Unmarshal(body, &v) == nil && strings.HasPrefix(v.StatusURL, httpspec.RunsPath+"/") {
		w.Header().Set("Location", v.StatusURL)
	}
}

// asyncDrained is closed once every accepted async run has ended and been
// recorded.
func (s *Server) asyncDrained() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		s.asyncRuns.Wait()
		close(done)
	}()
	return done
}

// sweepRuns deletes expired run records now and returns the ticker of the
// next sweeps (one that never fires without async routes).
func (s *Server) sweepRuns() *time.Ticker {
	if s.runs == nil {
		t := time.NewTicker(time.Hour)
		t.Stop()
		return t
	}
	s.runs.SweepRuns(context.Background())
	return time.NewTicker(sweepEvery)
}

// serveRunStatus answers GET /v1/runs/{id} on a server with async routes.
//
// A record is guarded by the auth of the route that accepted it. So that
// the answer does not tell a caller whether a run it may not read exists,
// an id with no record (unknown, expired, malformed, or of a route this
// server does not serve) is guarded by the auth of every async route: a
// caller that cannot read every route's runs gets the same 401 for it as
// for another route's run. Every 401 here has the same body (the
// verifier's reason goes to the audit log only), since reasons differ
// between auth kinds.
func (s *Server) serveRunStatus(w http.ResponseWriter, r *http.Request) {
	id, _ := strings.CutPrefix(r.URL.Path, httpspec.RunsPath+"/")
	// Every async route's auth is checked whatever the id, so the work
	// done (and its time) does not depend on whether a record exists.
	failed, code := s.checkAsyncAuth(w, r)
	if code != 0 {
		return
	}
	var rec runtime.RunRecord
	var found bool
	if runtime.ValidRunID(id) {
		var err error
		rec, found, err = s.runs.GetRun(r.Context(), id)
		if err != nil {
			// Told only to a caller that could read any record; others
			// get the 401 of an id without one.
			s.audit.Error("http.run_store_error", "error", err.Error())
			if len(failed) == 0 {
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "run store unavailable"})
				return
			}
			found = false
		}
	}
	guards := s.asyncAuthRefs()
	var owner *route
	if found {
		owner = s.asyncRouteNamed(rec.Route)
		if owner != nil {
			guards = []string{owner.authRef}
		}
	}
	for _, ref := range guards {
		if err := failed[ref]; err != nil {
			s.audit.Warn("http.auth_denied", "route", httpspec.RunsPath, "auth", ref, "detail", err.Error(), "remote", r.RemoteAddr)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
			return
		}
	}
	if owner == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
		return
	}
	out := struct {
		ID      string          `json:"execution_id"`
		State   string          `json:"state"`
		Outcome json.RawMessage `json:"outcome,omitempty"`
	}{ID: rec.ID, State: rec.State}
	if rec.State == runtime.RunEnded && json.Valid(rec.Outcome) {
		out.Outcome = rec.Outcome
	}
	body, err := json.Marshal(out)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "internal error"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	write(w, http.StatusOK, "application/json", body)
}

// checkAsyncAuth verifies the request against every async route's auth
// and returns the refs it failed, with why. Two credentials in one
// request are a 400, as on the routes (then code is that status, already
// answered).
func (s *Server) checkAsyncAuth(w http.ResponseWriter, r *http.Request) (failed map[string]error, code int) {
	verifiers := *s.verifiers.Load()
	failed = map[string]error{}
	for _, ref := range s.asyncAuthRefs() {
		if ref == "" {
			continue
		}
		if err := singleCredential(r.Header); err != nil {
			s.audit.Warn("http.auth_denied", "route", httpspec.RunsPath, "auth", ref, "detail", err.Error(), "remote", r.RemoteAddr)
			return nil, writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad request", "detail": err.Error()})
		}
		if _, err := verifiers[ref].Verify(r, nil); err != nil {
			failed[ref] = err
		}
	}
	return failed, 0
}

// asyncAuthRefs are the distinct auth refs of the async routes, sorted
// ("" for an open one).
func (s *Server) asyncAuthRefs() []string {
	set := map[string]bool{}
	for _, rt := range s.routes {
		if rt.async {
			set[rt.authRef] = true
		}
	}
	return runtime.SortedKeys(set)
}

// asyncRouteNamed is the async route called name ("POST /hook"), or nil.
func (s *Server) asyncRouteNamed(name string) *route {
	for _, rt := range s.routes {
		if rt.async && rt.name == name {
			return rt
		}
	}
	return nil
}
