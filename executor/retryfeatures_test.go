package executor_test

// Integration tests for the retry features of issue 4 (HTTP activities,
// activity-declared errors, retry budgets, retry_if, ordered retry rules).
// They run the real stack in-process, wired as `wf apply` wires it:
// config.Load -> planner.Build -> executor.Start with the real
// activity.Runner and a Badger statefile.Store in a temporary directory,
// against httptest servers and /bin/sh scripts, on the real clock. Intervals
// are kept small so that each test stays within a few seconds; the timing
// assertions are one-sided where a loaded machine can only make things
// later, with a tolerance on the other side.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

// timingSlack is how late a retry may start relative to its nominal time.
// The tests judge the engine by its own records: the delays and fire
// times it recorded must be exact, and no retry may reach the server
// before its recorded fire time (both hold on any machine). How late it
// is after that depends on the machine: the race detector, other builds
// and fsyncs on two shared cores can hold a step for a second or more, so
// this bound is generous; it only says the retry was neither lost nor
// restarted from scratch. The speed targets live in the benchmarks.
const timingSlack = 5 * time.Second

// runLimit bounds how long a test waits for a run or an event: only a
// hang may exceed it.
const runLimit = 60 * time.Second

// ---- the scripted HTTP server -------------------------------------------

// reply is one scripted response.
type reply struct {
	status     int
	retryAfter string // the Retry-After header, "" for none
}

// hit is one request as the server saw it.
type hit struct {
	at     time.Time
	header http.Header
}

// scriptServer answers each path with its script of replies, one per
// request, repeating the last one, and records every request.
type scriptServer struct {
	*httptest.Server
	mu      sync.Mutex
	scripts map[string][]reply
	hits    map[string][]hit
}

func newScriptServer(t *testing.T, scripts map[string][]reply) *scriptServer {
	t.Helper()
	s := &scriptServer{scripts: scripts, hits: map[string][]hit{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		s.mu.Lock()
		script, ok := s.scripts[r.URL.Path]
		n := len(s.hits[r.URL.Path])
		s.hits[r.URL.Path] = append(s.hits[r.URL.Path], hit{at: at, header: r.Header.Clone()})
		s.mu.Unlock()
		if !ok || len(script) == 0 {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusTeapot)
			return
		}
		rep := script[min(n, len(script)-1)]
		if rep.retryAfter != "" {
			w.Header().Set("Retry-After", rep.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"status":%d,"n":%d}`, rep.status, n+1)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptServer) hitsOf(path string) []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits[path])
}

// gaps returns the time between consecutive requests.
func gaps(hs []hit) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(hs); i++ {
		out = append(out, hs[i].at.Sub(hs[i-1].at))
	}
	return out
}

// ---- the stack, wired as cmd/wf/apply.go wires it -----------------------

// stack is one configuration directory and its state directory.
type stack struct {
	t        *testing.T
	dir      string
	stateDir string
	vars     []string
}

// newStack writes src as main.wf.hcl into a fresh configuration directory.
// vars are -var NAME=VALUE options.
func newStack(t *testing.T, src string, vars ...string) *stack {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wf.hcl"), []byte(src), 0o644); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return &stack{t: t, dir: dir, stateDir: filepath.Join(dir, ".wf"), vars: vars}
}

func (s *stack) load() *config.Config {
	s.t.Helper()
	cfg, diags := config.Load(s.dir, config.LoadOptions{Vars: s.vars, Env: []string{}})
	if diags.HasErrors() {
		s.t.Fatalf("load config: %s", diags.Error())
	}
	return cfg
}

// open opens the state store; it is closed at the end of the test unless
// the test closes it first (Close is idempotent).
func (s *stack) open() *statefile.Store {
	s.t.Helper()
	store, err := statefile.Open(s.stateDir, statefile.Options{Command: "retryfeatures test"})
	if err != nil {
		s.t.Fatalf("open state: %v", err)
	}
	s.t.Cleanup(func() { store.Close() })
	return store
}

// started is a run in progress and the events it has published so far.
type started struct {
	run  *executor.Run
	plan *planner.Plan
	rec  *recorder
}

// start plans cfg against store and starts the run, like applyDir and
// execute in cmd/wf/apply.go (minus the views and the signal handling).
func (s *stack) start(cfg *config.Config, store *statefile.Store) *started {
	s.t.Helper()
	plan, diags := planner.Build(cfg, store, planner.Options{Now: time.Now()})
	if diags.HasErrors() || plan == nil {
		s.t.Fatalf("plan: %s", diags.Error())
	}
	bus := event.NewBus()
	rec := newRecorder(bus) // before Start, so that the plan events are seen
	runner := activity.NewRunner(activity.Options{
		BaseEnv: []string{"PATH=" + os.Getenv("PATH")},
		TempDir: s.t.TempDir(),
	})
	run, err := executor.Start(context.Background(), executor.Options{
		Config:    cfg,
		Instances: planInstances(cfg, plan),
		Store:     store,
		Runner:    runner,
		Bus:       bus,
		// A fixed seed: none of these policies use jitter, but a failure
		// must replay the same way.
		Seed: 4,
	})
	if err != nil {
		bus.Close()
		s.t.Fatalf("start run: %v", err)
	}
	return &started{run: run, plan: plan, rec: rec}
}

// wait waits for the run to end (at most limit) and for every event it
// published to be recorded.
func (st *started) wait(t *testing.T, limit time.Duration) executor.Outcome {
	t.Helper()
	select {
	case <-st.run.Done():
	case <-time.After(limit):
		st.run.Cancel()
		<-st.run.Done()
		st.rec.close()
		t.Fatalf("run did not end within %s; events:\n%s", limit, st.rec.dump())
	}
	out, err := st.run.Wait()
	st.rec.close()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return out
}

// apply loads, plans and runs the configuration to its end on a fresh
// store, which stays open for inspection.
func (s *stack) apply(limit time.Duration) (executor.Outcome, *recorder, *statefile.Store) {
	s.t.Helper()
	store := s.open()
	st := s.start(s.load(), store)
	out := st.wait(s.t, limit)
	return out, st.rec, store
}

// planInstances mirrors cmd/wf: unchanged activities are skipped, resumed
// ones carry on from their state, every other action starts afresh.
func planInstances(cfg *config.Config, plan *planner.Plan) []core.Instance {
	byName := make(map[string]*config.Workflow, len(cfg.Workflows))
	for _, wf := range cfg.Workflows {
		byName[wf.Name] = wf
	}
	var out []core.Instance
	for _, ip := range plan.Instances {
		wf := byName[ip.Workflow]
		if wf == nil {
			continue
		}
		modes := make(map[string]core.Mode, len(ip.Activities))
		for _, a := range ip.Activities {
			switch a.Action {
			case planner.ActionUnchanged:
				modes[a.Name] = core.ModeSkip
			case planner.ActionResume:
				modes[a.Name] = core.ModeResume
			default:
				modes[a.Name] = core.ModeFresh
			}
		}
		out = append(out, core.Instance{Workflow: wf, Modes: modes})
	}
	return out
}

// ---- events -------------------------------------------------------------

// recorder keeps every event a bus delivers, in order.
type recorder struct {
	bus  *event.Bus
	mu   sync.Mutex
	evs  []event.Event
	done chan struct{}
}

func newRecorder(bus *event.Bus) *recorder {
	r := &recorder{bus: bus, done: make(chan struct{})}
	sub := bus.Subscribe()
	go func() {
		defer close(r.done)
		for {
			batch, ok := sub.Next(context.Background())
			if !ok {
				return
			}
			r.mu.Lock()
			r.evs = append(r.evs, batch...)
			r.mu.Unlock()
		}
	}()
	return r
}

// close closes the bus and waits until everything queued is recorded.
func (r *recorder) close() {
	r.bus.Close()
	<-r.done
}

func (r *recorder) all() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// of returns the events of one type, for one activity ("activity.NAME")
// or for all when activity is "".
func (r *recorder) of(typ event.Type, activity string) []event.Event {
	var out []event.Event
	for _, ev := range r.all() {
		if ev.Type == typ && (activity == "" || ev.Activity == activity) {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor polls until an event of typ (for any activity when activity is
// "") has been published and returns the first one.
func (r *recorder) waitFor(t *testing.T, typ event.Type, activity string, limit time.Duration) event.Event {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if evs := r.of(typ, activity); len(evs) > 0 {
			return evs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event for %q within %s; events:\n%s", typ, activity, limit, r.dump())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *recorder) dump() string {
	var s string
	for _, ev := range r.all() {
		s += fmt.Sprintf("  %s %s %s attempt=%d reason=%q", ev.Time.Format("15:04:05.000"), ev.Type, ev.Activity, ev.Attempt, ev.Reason)
		if ev.Error != nil {
			s += fmt.Sprintf(" error=%s", ev.Error.Type)
		}
		if ev.FireAt != nil {
			s += fmt.Sprintf(" fire_at=%s source=%s", ev.FireAt.Format("15:04:05.000"), ev.DelaySource)
		}
		s += "\n"
	}
	return s
}

// activityFailed returns the one activity_failed event of an activity.
func activityFailed(t *testing.T, rec *recorder, name string) event.Event {
	t.Helper()
	evs := rec.of(event.ActivityFailed, "activity."+name)
	if len(evs) != 1 {
		t.Fatalf("activity.%s: %d activity_failed events, want 1; events:\n%s", name, len(evs), rec.dump())
	}
	return evs[0]
}

func attemptsOf(t *testing.T, store *statefile.Store, workflow, key, name string) []*record.Attempt {
	t.Helper()
	atts, err := store.Attempts(workflow, key, name)
	if err != nil {
		t.Fatalf("read attempts of %s: %v", name, err)
	}
	return atts
}

func activityRecord(t *testing.T, store *statefile.Store, workflow, key, name string) *record.Activity {
	t.Helper()
	acts, err := store.Activities(workflow, key)
	if err != nil {
		t.Fatalf("read activities: %v", err)
	}
	a := acts[name]
	if a == nil {
		t.Fatalf("no state for activity %s", name)
	}
	return a
}

// ---- 1. Retry-After -----------------------------------------------------

func TestRetryFeaturesRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/honour": {{503, "1"}, {503, "1"}, {200, ""}},
		"/ignore": {{503, "1"}, {503, "1"}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

workflow "w" {
  key = "k"
  activity "honour" {
    http { url = "${var.base}/honour" }
    retry {
      backoff          = "fixed"
      initial_interval = "50ms"
      maximum_attempts = 5
    }
  }
  # The control: the same server answers, but the policy ignores it.
  activity "ignore" {
    http { url = "${var.base}/ignore" }
    retry {
      backoff           = "fixed"
      initial_interval  = "50ms"
      maximum_attempts  = 5
      honor_retry_after = false
    }
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("status %q; events:\n%s", out.Status, rec.dump())
	}

	tests := []struct {
		name             string
		minGap, maxGap   time.Duration
		source           string
		delay            time.Duration
		storedWaitSource string
	}{
		{"honour", time.Second, time.Second + timingSlack, "server", time.Second, "server"},
		{"ignore", 50 * time.Millisecond, 50*time.Millisecond + timingSlack, "policy", 50 * time.Millisecond, "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := srv.hitsOf("/" + tt.name)
			if len(hs) != 3 {
				t.Fatalf("%d requests, want 3", len(hs))
			}
			for i, g := range gaps(hs) {
				if g < tt.minGap || g >= tt.maxGap {
					t.Errorf("gap before attempt %d = %s, want in [%s, %s)", i+2, g, tt.minGap, tt.maxGap)
				}
			}
			sched := rec.of(event.RetryScheduled, "activity."+tt.name)
			if len(sched) != 2 {
				t.Fatalf("%d retry_scheduled events, want 2", len(sched))
			}
			for _, ev := range sched {
				if ev.DelaySource != tt.source {
					t.Errorf("retry %d: delay_source %q, want %q", ev.Attempt, ev.DelaySource, tt.source)
				}
				if ev.DelayMs == nil || *ev.DelayMs != tt.delay.Milliseconds() {
					t.Errorf("retry %d: delay_ms %v, want %d", ev.Attempt, ev.DelayMs, tt.delay.Milliseconds())
				}
			}
			atts := attemptsOf(t, store, "w", "k", tt.name)
			if len(atts) != 3 {
				t.Fatalf("%d stored attempts, want 3", len(atts))
			}
			for _, a := range atts[:2] {
				if !a.HasWait || a.Wait != tt.delay || a.WaitSource != tt.storedWaitSource {
					t.Errorf("stored attempt %d: wait %s (has %v) source %q, want %s %q", a.Number, a.Wait, a.HasWait, a.WaitSource, tt.delay, tt.storedWaitSource)
				}
			}
		})
	}
}

// ---- 2. Idempotency-Key -------------------------------------------------

func TestRetryFeaturesIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/a":   {{503, ""}, {503, ""}, {200, ""}},
		"/b":   {{503, ""}, {200, ""}},
		"/own": {{503, ""}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

retry_policy "quick" {
  backoff          = "fixed"
  initial_interval = "10ms"
  maximum_attempts = 5
}

workflow "w" {
  key = "k"
  activity "a" {
    http { url = "${var.base}/a" }
    retry = retry_policy.quick
  }
  activity "b" {
    http { url = "${var.base}/b" }
    retry = retry_policy.quick
  }
  activity "own" {
    http {
      url     = "${var.base}/own"
      headers = { "idempotency-key" = "mine-42" }
    }
    retry = retry_policy.quick
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("status %q; events:\n%s", out.Status, rec.dump())
	}

	keysOf := func(path string, want int) []string {
		t.Helper()
		hs := srv.hitsOf(path)
		if len(hs) != want {
			t.Fatalf("%s: %d requests, want %d", path, len(hs), want)
		}
		var keys []string
		for _, h := range hs {
			if vs := h.header.Values("Idempotency-Key"); len(vs) != 1 {
				t.Fatalf("%s: Idempotency-Key header values %q, want exactly one", path, vs)
			}
			keys = append(keys, h.header.Get("Idempotency-Key"))
		}
		return keys
	}
	keysA, keysB, keysOwn := keysOf("/a", 3), keysOf("/b", 2), keysOf("/own", 2)
	for name, keys := range map[string][]string{"a": keysA, "b": keysB} {
		if keys[0] == "" {
			t.Errorf("%s: empty Idempotency-Key", name)
		}
		for i, k := range keys {
			if k != keys[0] {
				t.Errorf("%s: attempt %d sent key %q, attempt 1 sent %q", name, i+1, k, keys[0])
			}
		}
		// The key the server saw is the one the engine recorded, so it
		// survives a resume.
		if rec := activityRecord(t, store, "w", "k", name); rec.IdempotencyKey != keys[0] {
			t.Errorf("%s: stored idempotency key %q, server saw %q", name, rec.IdempotencyKey, keys[0])
		}
	}
	if keysA[0] == keysB[0] {
		t.Errorf("activities a and b share the Idempotency-Key %q", keysA[0])
	}
	for i, k := range keysOwn {
		if k != "mine-42" {
			t.Errorf("own: attempt %d sent Idempotency-Key %q, want the configured %q", i+1, k, "mine-42")
		}
	}
	// attempt_started carries the engine's key for every attempt.
	for _, ev := range rec.of(event.AttemptStarted, "activity.a") {
		if ev.IdempotencyKey != keysA[0] {
			t.Errorf("attempt_started %d: key %q, want %q", ev.Attempt, ev.IdempotencyKey, keysA[0])
		}
	}
}

// ---- 3. non_retryable_errors with a wildcard ----------------------------

func TestRetryFeaturesHTTP4xxNonRetryable(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/missing": {{404, ""}},
		"/busy":    {{503, ""}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

retry_policy "api" {
  backoff              = "fixed"
  initial_interval     = "10ms"
  maximum_attempts     = 5
  non_retryable_errors = ["http:4*"]
}

workflow "w" {
  key = "k"
  activity "missing" {
    http { url = "${var.base}/missing" }
    retry = retry_policy.api
  }
  activity "busy" {
    http { url = "${var.base}/busy" }
    retry = retry_policy.api
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	if n := len(srv.hitsOf("/missing")); n != 1 {
		t.Errorf("404: %d requests, want exactly 1", n)
	}
	ev := activityFailed(t, rec, "missing")
	if ev.Reason != event.ReasonNonRetryable || ev.Error == nil || ev.Error.Type != "http:404" || ev.Attempt != 1 {
		t.Errorf("activity_failed = reason %q error %+v attempt %d, want non_retryable http:404 after attempt 1", ev.Reason, ev.Error, ev.Attempt)
	}
	if n := len(rec.of(event.RetryScheduled, "activity.missing")); n != 0 {
		t.Errorf("404 scheduled %d retries", n)
	}
	if n := len(srv.hitsOf("/busy")); n != 2 {
		t.Errorf("503: %d requests, want 2 (retried once, then 200)", n)
	}
	if r := activityRecord(t, store, "w", "k", "busy"); r.Status != record.StatusSucceeded || r.Attempts != 2 {
		t.Errorf("busy: status %s after %d attempts, want succeeded after 2", r.Status, r.Attempts)
	}
	if r := activityRecord(t, store, "w", "k", "missing"); r.Status != record.StatusFailed || r.FailReason != event.ReasonNonRetryable {
		t.Errorf("missing: status %s reason %q, want failed non_retryable", r.Status, r.FailReason)
	}
}

// ---- 4. budget, on_exhausted = "fail" -----------------------------------

func TestRetryFeaturesBudgetFail(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		"/a": {{503, ""}},
		"/b": {{503, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

retry_budget "api" {
  max_retries  = 3
  window       = "1m"
  on_exhausted = "fail"
}

retry_policy "api" {
  backoff          = "fixed"
  initial_interval = "10ms"
  maximum_attempts = 50
  budget           = retry_budget.api
}

workflow "w" {
  key = "k"
  activity "a" {
    http { url = "${var.base}/a" }
    retry = retry_policy.api
  }
  activity "b" {
    http { url = "${var.base}/b" }
    retry = retry_policy.api
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	hitsA, hitsB := len(srv.hitsOf("/a")), len(srv.hitsOf("/b"))
	if hitsA+hitsB != 5 || hitsA < 1 || hitsB < 1 {
		t.Errorf("requests a=%d b=%d, want 5 in all (2 first attempts + 3 retries)", hitsA, hitsB)
	}
	if out.Summary.Retries != 3 || out.Summary.Attempts != 5 {
		t.Errorf("summary: %d attempts %d retries, want 5 and 3", out.Summary.Attempts, out.Summary.Retries)
	}
	// Both activities keep failing, so each is eventually refused.
	for _, name := range []string{"a", "b"} {
		ev := activityFailed(t, rec, name)
		if ev.Reason != event.ReasonBudgetExhausted {
			t.Errorf("%s: reason %q, want budget_exhausted", name, ev.Reason)
		}
		if ev.Error == nil || ev.Error.Type != "budget_exhausted" {
			t.Errorf("%s: error %+v, want type budget_exhausted", name, ev.Error)
		}
		if r := activityRecord(t, store, "w", "k", name); r.FailReason != event.ReasonBudgetExhausted {
			t.Errorf("%s: stored fail reason %q", name, r.FailReason)
		}
	}
	budgets, err := store.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	if b := budgets["api"]; b == nil || len(b.Stamps) != 3 {
		t.Errorf("stored budget = %+v, want 3 grant stamps", b)
	}
}

// ---- 5. budget, on_exhausted = "wait" -----------------------------------

const budgetWaitHCL = `
variable "base" { type = string }

retry_budget "api" {
  max_retries  = 1
  window       = "1s"
  on_exhausted = "wait"
}

retry_policy "api" {
  backoff          = "fixed"
  initial_interval = "10ms"
  maximum_attempts = 3
  budget           = retry_budget.api
}

workflow "w" {
  key = "k"
  activity "a" {
    http { url = "${var.base}/a" }
    retry = retry_policy.api
  }
  activity "b" {
    http { url = "${var.base}/b" }
    retry = retry_policy.api
  }
}
`

func failOnceScripts() map[string][]reply {
	return map[string][]reply{
		"/a": {{503, ""}, {200, ""}},
		"/b": {{503, ""}, {200, ""}},
	}
}

// budgetSplit names the activity whose retry the budget granted at once
// and the one that had to wait, from the first run's events.
func budgetSplit(t *testing.T, rec *recorder) (granted event.Event, wait event.Event) {
	t.Helper()
	wait = rec.waitFor(t, event.BudgetWait, "", runLimit)
	other := "activity.a"
	if wait.Activity == other {
		other = "activity.b"
	}
	var failed []event.Event
	for _, ev := range rec.of(event.AttemptFailed, other) {
		if ev.Attempt == 1 {
			failed = append(failed, ev)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%s: %d attempt_failed events for attempt 1; events:\n%s", other, len(failed), rec.dump())
	}
	granted = failed[0]
	if granted.Budget == nil || granted.Budget.Used != 1 || granted.Budget.MaxRetries != 1 {
		t.Fatalf("%s attempt 1 failed with budget usage %+v, want 1 of 1 used (the grant)", other, granted.Budget)
	}
	return granted, wait
}

func TestRetryFeaturesBudgetWait(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, failOnceScripts())
	s := newStack(t, budgetWaitHCL, "base="+srv.URL)
	store := s.open()
	st := s.start(s.load(), store)
	granted, wait := budgetSplit(t, st.rec)
	out := st.wait(t, runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("status %q; events:\n%s", out.Status, st.rec.dump())
	}

	// The grant is stamped when the failure is decided, so the waiter's
	// turn comes exactly one window later.
	if wait.FireAt == nil || !wait.FireAt.Equal(granted.Time.Add(time.Second)) {
		t.Fatalf("budget_wait fire_at %v, want the grant %v + 1s", wait.FireAt, granted.Time)
	}
	if wait.DelaySource != "budget" || wait.Attempt != 2 {
		t.Errorf("budget_wait: source %q attempt %d, want budget and 2", wait.DelaySource, wait.Attempt)
	}
	grantedHits := srv.hitsOf("/" + granted.Activity[len("activity."):])
	waitHits := srv.hitsOf("/" + wait.Activity[len("activity."):])
	if len(grantedHits) != 2 || len(waitHits) != 2 {
		t.Fatalf("requests: granted %d, waiting %d; want 2 each", len(grantedHits), len(waitHits))
	}
	if g := grantedHits[1].at.Sub(granted.Time); g > 10*time.Millisecond+timingSlack {
		t.Errorf("the granted retry started %s after its grant, want about 10ms", g)
	}
	second := waitHits[1].at
	if second.Before(*wait.FireAt) {
		t.Errorf("the waiting retry started %s before the budget freed", wait.FireAt.Sub(second))
	}
	if late := second.Sub(*wait.FireAt); late > timingSlack {
		t.Errorf("the waiting retry started %s after the budget freed", late)
	}
	if g := second.Sub(granted.Time); g < time.Second {
		t.Errorf("the waiting retry started %s after the grant, want at least the 1s window", g)
	}
	// The waiting retry's own grant is stamped when its timer fires.
	budgets, err := store.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	b := budgets["api"]
	if b == nil || len(b.Stamps) == 0 || b.Stamps[len(b.Stamps)-1].Before(*wait.FireAt) {
		t.Errorf("stored budget %+v: want a last grant at or after %v", b, wait.FireAt)
	}
}

func TestRetryFeaturesBudgetWaitSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, failOnceScripts())
	s := newStack(t, budgetWaitHCL, "base="+srv.URL)

	// Run 1: stopped while the budget timer is pending.
	store := s.open()
	st := s.start(s.load(), store)
	granted, wait := budgetSplit(t, st.rec)
	st.run.Stop()
	if out := st.wait(t, runLimit); out.Status != event.StatusInterrupted {
		t.Fatalf("run 1 status %q, want interrupted; events:\n%s", out.Status, st.rec.dump())
	}
	if err := store.Close(); err != nil {
		t.Fatalf("close state: %v", err)
	}
	fireAt := *wait.FireAt
	waiter := wait.Activity[len("activity."):]
	// On a loaded machine run 1 may end after the budget frees; the
	// checks below hold either way: the recorded fire time is kept, and
	// the retry never starts before it.

	// What survived the restart.
	store = s.open()
	budgets, err := store.Budgets()
	if err != nil {
		t.Fatal(err)
	}
	if b := budgets["api"]; b == nil || len(b.Stamps) != 1 || !b.Stamps[0].Equal(granted.Time) {
		t.Fatalf("stored budget after restart = %+v, want the one grant stamped at %v", b, granted.Time)
	}
	r := activityRecord(t, store, "w", "k", waiter)
	if r.Status != record.StatusWaiting || r.Timer == nil || r.Timer.Kind != record.TimerBudget || !r.Timer.FireAt.Equal(fireAt) || r.Timer.Attempt != 2 {
		t.Fatalf("stored %s = status %s timer %+v, want a budget timer for attempt 2 at %v", waiter, r.Status, r.Timer, fireAt)
	}

	// Restart before the budget frees (when run 1 left time for that): a
	// timer restarted from now with the 10ms policy wait would fire
	// before the recorded time, one restarted with a full window would
	// not keep the recorded fire_at.
	if d := time.Until(granted.Time.Add(400 * time.Millisecond)); d > 0 {
		time.Sleep(d)
	}
	st = s.start(s.load(), store)
	for _, a := range st.plan.Instances[0].Activities {
		if a.Name == waiter && a.Action != planner.ActionResume {
			t.Errorf("plan action for %s = %s, want resume", waiter, a.Action)
		}
	}
	out := st.wait(t, runLimit)
	if out.Status != event.StatusSucceeded {
		t.Fatalf("run 2 status %q; events:\n%s", out.Status, st.rec.dump())
	}
	rec := st.rec
	recovered := rec.of(event.TimerRecovered, wait.Activity)
	if len(recovered) != 1 || recovered[0].FireAt == nil || !recovered[0].FireAt.Equal(fireAt) || recovered[0].DelaySource != "budget" {
		t.Fatalf("timer_recovered for %s = %+v, want one at the recorded %v; events:\n%s", waiter, recovered, fireAt, rec.dump())
	}
	// The window was not reset: at restart the grant still counts (when
	// the restart came within the grant's window: on a loaded machine it
	// may come after it, when the grant has rightly expired).
	if u := recovered[0].Budget; recovered[0].Time.Before(granted.Time.Add(time.Second)) && (u == nil || u.Used != 1) {
		t.Errorf("timer_recovered budget usage %+v at %v, want 1 of 1 used (granted at %v)", u, recovered[0].Time, granted.Time)
	}
	hs := srv.hitsOf("/" + waiter)
	if len(hs) != 2 {
		t.Fatalf("%s: %d requests, want 2", waiter, len(hs))
	}
	if hs[1].at.Before(fireAt) {
		t.Errorf("%s retried %s before its recorded time", waiter, fireAt.Sub(hs[1].at))
	}
	if late := hs[1].at.Sub(fireAt); late > timingSlack {
		t.Errorf("%s retried %s after its recorded time", waiter, late)
	}
	atts := attemptsOf(t, store, "w", "k", waiter)
	if len(atts) != 2 || atts[0].Outcome != record.OutcomeFailed || atts[1].Outcome != record.OutcomeSucceeded {
		t.Errorf("%s attempts = %+v, want failed then succeeded (no new generation)", waiter, atts)
	}
}

// ---- 6. retry_if --------------------------------------------------------

func TestRetryFeaturesRetryIf(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{"/down": {{503, ""}}})
	s := newStack(t, `
variable "base" { type = string }

workflow "w" {
  key = "k"
  # Unlimited attempts: only retry_if stops it.
  activity "counted" {
    http { url = "${var.base}/down" }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      retry_if         = attempt < 3
    }
  }
  activity "fraud" {
    exec {
      script = <<-EOT
        printf '{"type":"Fraud","message":"stolen card"}' > "$WF_ERROR_FILE"
        exit 1
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 5
      retry_if         = error.type != "Fraud"
    }
  }
  # The control: the same predicate lets other error types through.
  activity "other" {
    exec {
      script = <<-EOT
        printf '{"type":"Glitch"}' > "$WF_ERROR_FILE"
        exit 1
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 3
      retry_if         = error.type != "Fraud"
    }
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	if n := len(srv.hitsOf("/down")); n != 3 {
		t.Errorf("counted: %d requests, want exactly 3", n)
	}
	tests := []struct {
		name     string
		attempts int
		reason   string
		errType  string
	}{
		{"counted", 3, event.ReasonRetryIf, "http:503"},
		{"fraud", 1, event.ReasonRetryIf, "Fraud"},
		{"other", 3, event.ReasonMaxAttempts, "Glitch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := activityFailed(t, rec, tt.name)
			if ev.Reason != tt.reason || ev.Attempt != tt.attempts || ev.Error == nil || ev.Error.Type != tt.errType {
				t.Errorf("activity_failed: reason %q attempt %d error %+v, want %s after %d attempts with %s", ev.Reason, ev.Attempt, ev.Error, tt.reason, tt.attempts, tt.errType)
			}
			if n := len(attemptsOf(t, store, "w", "k", tt.name)); n != tt.attempts {
				t.Errorf("%d stored attempts, want %d", n, tt.attempts)
			}
			if n := len(rec.of(event.AttemptStarted, "activity."+tt.name)); n != tt.attempts {
				t.Errorf("%d attempt_started events, want %d", n, tt.attempts)
			}
		})
	}
}

// ---- 7. the error file --------------------------------------------------

func TestRetryFeaturesErrorFile(t *testing.T) {
	t.Parallel()
	s := newStack(t, `
workflow "w" {
  key = "k"
  activity "charge" {
    exec {
      script = <<-EOT
        printf '{"type":"CardDeclined","message":"nope","non_retryable":true}' > "$WF_ERROR_FILE"
        exit 1
      EOT
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 5
    }
  }
}
`)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed; events:\n%s", out.Status, rec.dump())
	}
	want := event.Error{Type: "CardDeclined", Message: "nope", NonRetryable: true}
	failed := rec.of(event.AttemptFailed, "activity.charge")
	if len(failed) != 1 || failed[0].Attempt != 1 || failed[0].Error == nil || *failed[0].Error != want {
		t.Fatalf("attempt_failed events = %+v, want one for attempt 1 with %+v", failed, want)
	}
	ev := activityFailed(t, rec, "charge")
	if ev.Reason != event.ReasonNonRetryable || ev.Error == nil || ev.Error.Type != "CardDeclined" {
		t.Errorf("activity_failed: reason %q error %+v, want non_retryable CardDeclined", ev.Reason, ev.Error)
	}
	atts := attemptsOf(t, store, "w", "k", "charge")
	if len(atts) != 1 {
		t.Fatalf("%d stored attempts, want 1", len(atts))
	}
	a := atts[0]
	if a.Outcome != record.OutcomeFailed || a.Error == nil || *a.Error != (record.Error{Type: "CardDeclined", Message: "nope", NonRetryable: true}) || a.HasWait {
		t.Errorf("stored attempt = %+v error %+v, want failed CardDeclined/nope/non-retryable with no wait", a, a.Error)
	}
	if r := activityRecord(t, store, "w", "k", "charge"); r.FailReason != event.ReasonNonRetryable || r.LastError == nil || r.LastError.Type != "CardDeclined" {
		t.Errorf("stored activity: reason %q last error %+v", r.FailReason, r.LastError)
	}
}

// ---- 8. ordered rules ---------------------------------------------------

func TestRetryFeaturesOrderedRules(t *testing.T) {
	t.Parallel()
	srv := newScriptServer(t, map[string][]reply{
		// Each rule keeps its own schedule.
		"/schedule": {{429, ""}, {429, ""}, {503, ""}, {503, ""}, {200, ""}},
		// The 429 rule allows 3 and sees its 3rd 429 at attempt 5, while
		// the catch-all rule has used 2 of 10: counted per rule, the run
		// ends at attempt 5; a shared count would end it at attempt 3.
		"/bounded": {{503, ""}, {503, ""}, {429, ""}, {429, ""}, {429, ""}, {200, ""}},
	})
	s := newStack(t, `
variable "base" { type = string }

workflow "w" {
  key = "k"
  activity "schedule" {
    http { url = "${var.base}/schedule" }
    retry {
      on               = ["http:429"]
      backoff          = "fixed"
      initial_interval = "300ms"
      maximum_attempts = 10
    }
    retry {
      backoff          = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 10
    }
  }
  activity "bounded" {
    http { url = "${var.base}/bounded" }
    retry {
      on               = ["http:429"]
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 3
    }
    retry {
      backoff          = "fixed"
      initial_interval = "10ms"
      maximum_attempts = 10
    }
  }
}
`, "base="+srv.URL)
	out, rec, store := s.apply(runLimit)
	if out.Status != event.StatusFailed {
		t.Fatalf("status %q, want failed (bounded fails); events:\n%s", out.Status, rec.dump())
	}

	t.Run("each rule has its own schedule", func(t *testing.T) {
		hs := srv.hitsOf("/schedule")
		if len(hs) != 5 {
			t.Fatalf("%d requests, want 5", len(hs))
		}
		want := []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
		for i, g := range gaps(hs) {
			if g < want[i] || g > want[i]+timingSlack {
				t.Errorf("gap before attempt %d = %s, want %s (+%s)", i+2, g, want[i], timingSlack)
			}
		}
		r := activityRecord(t, store, "w", "k", "schedule")
		if r.Status != record.StatusSucceeded || !slices.Equal(r.RuleCounts, []int{2, 2}) {
			t.Errorf("stored: status %s rule counts %v, want succeeded with [2 2]", r.Status, r.RuleCounts)
		}
	})
	t.Run("a rule's maximum_attempts bounds its own count", func(t *testing.T) {
		if n := len(srv.hitsOf("/bounded")); n != 5 {
			t.Errorf("%d requests, want 5 (two 503s, then three 429s)", n)
		}
		ev := activityFailed(t, rec, "bounded")
		if ev.Reason != event.ReasonMaxAttempts || ev.Attempt != 5 || ev.Error == nil || ev.Error.Type != "http:429" {
			t.Errorf("activity_failed: reason %q attempt %d error %+v, want max_attempts at attempt 5 on http:429", ev.Reason, ev.Attempt, ev.Error)
		}
		r := activityRecord(t, store, "w", "k", "bounded")
		if !slices.Equal(r.RuleCounts, []int{3, 2}) {
			t.Errorf("stored rule counts %v, want [3 2]", r.RuleCounts)
		}
	})
}
