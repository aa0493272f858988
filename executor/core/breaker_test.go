package core

import (
	"slices"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// The fake-clock tests of circuit breakers (SPEC §11): every transition,
// a crash in each state, and half-open races between activities.

func apiBreaker(minCalls, halfOpen int) retry.Breaker {
	return retry.Breaker{Name: "api", FailureRatio: 0.5, MinimumCalls: minCalls, Window: 10 * time.Second, BreakDuration: 30 * time.Second, HalfOpenCalls: halfOpen}
}

// behind is a fixed 1s retry policy behind breaker api.
func behind(onOpen string) []retry.Rule {
	return []retry.Rule{{Policy: retry.Policy{Backoff: retry.Fixed, InitialInterval: time.Second, MaximumInterval: time.Second,
		MaximumAttempts: 10, Jitter: retry.Jitter{Mode: retry.JitterNone}, CircuitBreaker: "api", OnOpen: onOpen}}}
}

func breakerWorld(b retry.Breaker, names ...string) *world {
	var acts []*config.Activity
	for _, n := range names {
		acts = append(acts, execAct(n, behind("wait")))
	}
	return &world{wf: workflow(acts...), breakers: map[string]retry.Breaker{"api": b}}
}

func startedNames(r Ready) []string {
	var out []string
	for _, s := range r.Start {
		out = append(out, s.Activity)
	}
	return out
}

// noStartWhileOpen replays every step's events in order and fails when an
// attempt started while breaker api was open.
func noStartWhileOpen(t *testing.T, h *harness) {
	t.Helper()
	state := event.CircuitStateClosed
	for i, r := range h.steps {
		for _, e := range r.Events {
			switch e.Type {
			case event.Plan:
				for _, c := range e.Circuits {
					if c.Name == "api" {
						state = c.State
					}
				}
			case event.CircuitOpened:
				state = event.CircuitStateOpen
			case event.CircuitHalfOpen:
				state = event.CircuitStateHalfOpen
			case event.CircuitClosed:
				state = event.CircuitStateClosed
			case event.AttemptStarted:
				if state == event.CircuitStateOpen {
					t.Errorf("step %d: %s attempt %d started while the breaker was open", i, e.Activity, e.Attempt)
				}
			}
		}
	}
}

func breakerRec(h *harness) *record.Breaker { return h.state.breakers["api"] }

// openIt fails a, b and c at +100ms (minimum_calls 3): the third opens
// the breaker until +30.1s.
func openIt(t *testing.T, h *harness) {
	t.Helper()
	h.at(100 * time.Millisecond)
	for _, n := range []string{"a", "b"} {
		if r := h.finish(n, fail("http:503")); len(eventsOf(r, event.CircuitOpened)) != 0 {
			t.Fatalf("opened after %s, below minimum_calls", n)
		}
	}
	r := h.finish("c", fail("http:503"))
	opened := eventsOf(r, event.CircuitOpened)
	if len(opened) != 1 || opened[0].Breaker != "api" || opened[0].Circuit == nil ||
		opened[0].Circuit.Calls != 3 || opened[0].Circuit.Failures != 3 ||
		!opened[0].Circuit.HalfOpenAt.Equal(t0.Add(30*time.Second+100*time.Millisecond)) {
		t.Fatalf("circuit_opened = %+v", opened)
	}
	// The retry is told first, then the transition: the plain view joins
	// attempt_failed and retry_scheduled into one line.
	if got := types(r); !slices.Equal(got, []event.Type{event.AttemptFailed, event.RetryScheduled, event.CircuitOpened}) {
		t.Fatalf("events = %v", got)
	}
	if b := breakerRec(h); b == nil || b.State != "open" || !b.HalfOpenAt.Equal(t0.Add(30*time.Second+100*time.Millisecond)) {
		t.Fatalf("breaker record = %+v, want it open (committed with the failure)", b)
	}
}

var halfOpenAt = t0.Add(30*time.Second + 100*time.Millisecond)

// TestBreakerOpenWaitHalfOpenClose walks closed -> open -> half-open ->
// closed with four activities: the breaker opens after minimum_calls,
// retries due while it is open wait durably (not counted as failures or
// retries), one trial goes through at the end of the break while the
// others wait for it, and its success closes the breaker and lets them go.
func TestBreakerOpenWaitHalfOpenClose(t *testing.T) {
	w := breakerWorld(apiBreaker(3, 1), "a", "b", "c", "d")
	h := newHarness(t, w, nil, t0)
	r := h.start()
	if len(r.Start) != 4 {
		t.Fatalf("started %v", startedNames(r))
	}
	if pl := eventsOf(r, event.Plan); len(pl[0].Circuits) != 1 || pl[0].Circuits[0].State != "closed" {
		t.Fatalf("plan circuits = %+v", pl[0].Circuits)
	}
	openIt(t, h)
	// d was let through before the breaker opened: its failure is late
	// and not counted.
	r = h.finish("d", fail("http:503"))
	if b := breakerRec(h); b.State != "open" || b.Epoch != 1 {
		t.Fatalf("a late failure changed the breaker: %+v", b)
	}

	// The retries come due at +1.1s: none starts, each waits for the
	// breaker on a durable timer until the end of the break.
	h.at(1100 * time.Millisecond)
	r = h.tick()
	if len(r.Start) != 0 {
		t.Fatalf("started %v while open", startedNames(r))
	}
	waits := eventsOf(r, event.CircuitWait)
	if len(waits) != 4 {
		t.Fatalf("circuit_wait events = %d, want 4", len(waits))
	}
	for _, e := range waits {
		if e.FireAt == nil || !e.FireAt.Equal(halfOpenAt) || e.Circuit.State != "open" || e.Attempt != 2 {
			t.Fatalf("circuit_wait = %+v", e)
		}
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		rec := h.state.activity(addr, n)
		if rec.Timer == nil || rec.Timer.Kind != record.TimerCircuit || !rec.Timer.FireAt.Equal(halfOpenAt) || rec.Attempts != 1 {
			t.Fatalf("%s = %+v, want a circuit timer at the end of the break and still 1 attempt", n, rec)
		}
	}
	if !r.Wake.Equal(halfOpenAt) {
		t.Fatalf("wake %v, want %v", r.Wake, halfOpenAt)
	}
	h.now = halfOpenAt.Add(-time.Millisecond)
	if r = h.tick(); len(r.Start) != 0 {
		t.Fatalf("started %v before half-open", startedNames(r))
	}

	// Half-open: one trial (a, the first in order); b, c and d wait for it.
	h.now = halfOpenAt
	r = h.tick()
	if got := startedNames(r); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("half-open started %v, want only the trial a", got)
	}
	if len(eventsOf(r, event.CircuitHalfOpen)) != 1 {
		t.Fatalf("no circuit_half_open: %v", types(r))
	}
	parked := eventsOf(r, event.CircuitWait)
	if len(parked) != 3 {
		t.Fatalf("circuit_wait = %d, want 3", len(parked))
	}
	for _, e := range parked {
		if e.FireAt != nil || e.Circuit.State != "half_open" {
			t.Fatalf("a wait for a trial slot has no time: %+v", e)
		}
	}

	// The trial succeeds: closed, and the others start in the same step.
	h.now = halfOpenAt.Add(200 * time.Millisecond)
	r = h.finish("a", nil)
	if len(eventsOf(r, event.CircuitClosed)) != 1 {
		t.Fatalf("no circuit_closed: %v", types(r))
	}
	if got := startedNames(r); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("after closing started %v", got)
	}
	if b := breakerRec(h); b.State != "closed" || len(b.Window) != 0 {
		t.Fatalf("breaker record = %+v", b)
	}
	for _, n := range []string{"b", "c", "d"} {
		h.finish(n, nil)
	}
	rc := eventsOf(h.steps[len(h.steps)-1], event.RunCompleted)
	if len(rc) != 1 || rc[0].Status != event.StatusSucceeded || rc[0].Summary.Attempts != 8 || rc[0].Summary.Retries != 4 {
		t.Fatalf("run_completed = %+v", rc)
	}
	// Waiting for the breaker counted no failure: each activity made two
	// attempts, and no rule counted more than the one real failure.
	for _, n := range []string{"a", "b", "c", "d"} {
		if rec := h.state.activity(addr, n); rec.Attempts != 2 || !slices.Equal(rec.RuleCounts, []int{1}) {
			t.Errorf("%s: %d attempts, rule counts %v", n, rec.Attempts, rec.RuleCounts)
		}
	}
	noStartWhileOpen(t, h)
}

// TestBreakerTrialFailureReopens: a failed trial opens the breaker for
// another break_duration; the activities waiting for the trial then wait
// for the new end of the break.
func TestBreakerTrialFailureReopens(t *testing.T) {
	w := breakerWorld(apiBreaker(3, 1), "a", "b", "c")
	h := newHarness(t, w, nil, t0)
	h.start()
	openIt(t, h)
	h.at(1100 * time.Millisecond)
	h.tick()
	h.now = halfOpenAt
	h.tick()
	h.now = halfOpenAt.Add(time.Second)
	r := h.finish("a", fail("http:503"))
	reopened := eventsOf(r, event.CircuitOpened)
	next := h.now.Add(30 * time.Second)
	if len(reopened) != 1 || !reopened[0].Circuit.HalfOpenAt.Equal(next) {
		t.Fatalf("circuit_opened = %+v, want open until %v", reopened, next)
	}
	waits := eventsOf(r, event.CircuitWait)
	if len(waits) != 2 || waits[0].FireAt == nil || !waits[0].FireAt.Equal(next) {
		t.Fatalf("the parked activities' waits = %+v", waits)
	}
	if len(r.Start) != 0 {
		t.Fatalf("started %v after a failed trial", startedNames(r))
	}
	// a's own retry (1s) is due before the break ends: it waits too.
	h.now = h.now.Add(1100 * time.Millisecond)
	if r = h.tick(); len(r.Start) != 0 || len(eventsOf(r, event.CircuitWait)) != 1 {
		t.Fatalf("a's retry: start %v, events %v", startedNames(r), types(r))
	}
	h.now = next
	if r = h.tick(); !slices.Equal(startedNames(r), []string{"a"}) {
		t.Fatalf("second half-open started %v", startedNames(r))
	}
	noStartWhileOpen(t, h)
}

// TestBreakerHalfOpenRaces: two trial calls (half_open_calls 2) whose
// results arrive in one batch, in either order: a failure among them
// opens the breaker whatever came first; and an interrupted trial gives
// its slot to a waiting activity in the same step.
func TestBreakerHalfOpenRaces(t *testing.T) {
	for _, order := range [][]string{{"a", "b"}, {"b", "a"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			w := breakerWorld(apiBreaker(3, 2), "a", "b", "c")
			h := newHarness(t, w, nil, t0)
			h.start()
			openIt(t, h)
			h.at(1100 * time.Millisecond)
			h.tick()
			h.now = halfOpenAt
			if r := h.tick(); !slices.Equal(startedNames(r), []string{"a", "b"}) {
				t.Fatalf("two trial slots, started %v", startedNames(r))
			}
			h.now = halfOpenAt.Add(time.Second)
			outcome := map[string]*retry.Failure{"a": nil, "b": fail("http:503")}
			var rs []Result
			for _, n := range order {
				rs = append(rs, h.result(n, outcome[n]))
			}
			r := h.record(h.c.AttemptsDone(h.now, rs))
			if len(eventsOf(r, event.CircuitOpened)) != 1 || len(eventsOf(r, event.CircuitClosed)) != 0 {
				t.Fatalf("events = %v, want the breaker open again", types(r))
			}
			if b := breakerRec(h); b.State != "open" {
				t.Fatalf("breaker = %+v", b)
			}
			if len(r.Start) != 0 {
				t.Fatalf("started %v", startedNames(r))
			}
			noStartWhileOpen(t, h)
		})
	}
	t.Run("interrupted trial", func(t *testing.T) {
		w := breakerWorld(apiBreaker(3, 1), "a", "b", "c")
		h := newHarness(t, w, nil, t0)
		h.start()
		openIt(t, h)
		h.at(1100 * time.Millisecond)
		h.tick()
		h.now = halfOpenAt
		h.tick()
		h.now = halfOpenAt.Add(time.Second)
		r := h.interrupt("a")
		// a's next attempt is due at once but b asked first: b takes the
		// freed slot (activity order), a and c wait for it.
		if got := startedNames(r); len(got) != 1 {
			t.Fatalf("after the interrupted trial started %v, want one new trial", got)
		}
		if b := breakerRec(h); b.State != "half_open" || b.TrialSuccesses != 0 {
			t.Fatalf("an interrupted trial changed the breaker: %+v", b)
		}
		noStartWhileOpen(t, h)
	})
}

// TestBreakerLateOutcomes: an attempt let through before the breaker
// opened is not a trial: its success while half-open changes nothing.
func TestBreakerLateOutcomes(t *testing.T) {
	w := breakerWorld(apiBreaker(1, 1), "a", "b")
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(100 * time.Millisecond)
	if r := h.finish("a", fail("http:503")); len(eventsOf(r, event.CircuitOpened)) != 1 {
		t.Fatalf("minimum_calls 1: %v", types(r))
	}
	h.at(1100 * time.Millisecond)
	h.tick()
	h.now = halfOpenAt
	if r := h.tick(); !slices.Equal(startedNames(r), []string{"a"}) {
		t.Fatalf("trial = %v", startedNames(r))
	}
	// b, let through at the start, ends now: not the trial.
	h.now = halfOpenAt.Add(time.Second)
	if r := h.finish("b", nil); len(eventsOf(r, event.CircuitClosed)) != 0 {
		t.Fatalf("a late success closed the breaker: %v", types(r))
	}
	if r := h.finish("a", nil); len(eventsOf(r, event.CircuitClosed)) != 1 {
		t.Fatalf("the trial's success did not close it: %v", types(r))
	}
}

// TestBreakerInterruptedNeverCounts: interrupted attempts are not
// failures for a breaker either (SPEC §4.1).
func TestBreakerInterruptedNeverCounts(t *testing.T) {
	w := breakerWorld(apiBreaker(1, 1), "a")
	h := newHarness(t, w, nil, t0)
	h.start()
	for i := range 3 {
		h.at(time.Duration(i+1) * time.Second)
		r := h.interrupt("a")
		if len(eventsOf(r, event.CircuitOpened)) != 0 || len(r.Start) != 1 {
			t.Fatalf("interrupt %d: events %v, start %v", i+1, types(r), startedNames(r))
		}
	}
	if b := breakerRec(h); b != nil && (b.State != "closed" || windowCounts(b) != [2]int{}) {
		t.Fatalf("breaker = %+v", b)
	}
}

// TestBreakerFailurePatterns: with failures set, other errors count as
// successes (the downstream answered).
func TestBreakerFailurePatterns(t *testing.T) {
	b := apiBreaker(2, 1)
	b.Failures = []string{"http:5*"}
	w := breakerWorld(b, "a", "b", "c", "d")
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(time.Second)
	h.finish("a", fail("http:429"))
	h.finish("b", fail("http:429"))
	if rec := breakerRec(h); rec.State != "closed" || windowCounts(rec) != [2]int{2, 0} {
		t.Fatalf("429s counted as failures: %+v", rec)
	}
	h.finish("c", fail("http:503"))
	r := h.finish("d", fail("http:503"))
	if len(eventsOf(r, event.CircuitOpened)) != 1 {
		t.Fatalf("2 of 4 matching failures did not open it: %+v", breakerRec(h))
	}
}

// TestBreakerOnOpenFail: on_open = "fail" fails the activity with
// circuit_open instead of waiting; nothing starts. The breaker is loaded
// open from state.
func TestBreakerOnOpenFail(t *testing.T) {
	st := newMemState()
	st.breakers["api"] = &record.Breaker{Name: "api", State: "open", Since: t0.Add(-10 * time.Second), HalfOpenAt: t0.Add(20 * time.Second), Epoch: 3}
	w := &world{wf: workflow(execAct("fast", behind("fail")), execAct("patient", behind("wait"))), breakers: map[string]retry.Breaker{"api": apiBreaker(3, 1)}}
	h := newHarness(t, w, st, t0)
	r := h.start()
	if len(r.Start) != 0 {
		t.Fatalf("started %v", startedNames(r))
	}
	af := eventsOf(r, event.ActivityFailed)
	if len(af) != 1 || af[0].Activity != "activity.fast" || af[0].Reason != event.ReasonCircuitOpen || af[0].Error.Type != TypeCircuitOpen {
		t.Fatalf("activity_failed = %+v", af)
	}
	if rec := h.state.activity(addr, "fast"); rec.Status != record.StatusFailed || rec.Attempts != 0 || rec.FailReason != "circuit_open" {
		t.Fatalf("fast = %+v", rec)
	}
	cw := eventsOf(r, event.CircuitWait)
	if len(cw) != 1 || cw[0].Activity != "activity.patient" || !cw[0].FireAt.Equal(t0.Add(20*time.Second)) || cw[0].Attempt != 1 {
		t.Fatalf("circuit_wait = %+v", cw)
	}
	if !r.Wake.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("wake = %v", r.Wake)
	}
	h.at(20 * time.Second)
	if r = h.tick(); !slices.Equal(startedNames(r), []string{"patient"}) {
		t.Fatalf("at the end of the break started %v", startedNames(r))
	}
}

// TestBreakerCrashWhileClosed: the window survives a crash.
func TestBreakerCrashWhileClosed(t *testing.T) {
	w := breakerWorld(apiBreaker(3, 1), "a", "b", "c")
	h := newHarness(t, w, nil, t0)
	h.start()
	h.at(100 * time.Millisecond)
	h.finish("a", fail("http:503"))
	h.finish("b", fail("http:503"))
	if b := breakerRec(h); windowCounts(b) != [2]int{0, 2} {
		t.Fatalf("window not committed: %+v", b)
	}
	// Crash with c running; the restarted run interrupts it (not counted)
	// and starts it again at once.
	h2 := newHarness(t, w, h.state, t0.Add(200*time.Millisecond))
	if r := h2.start(); !slices.Equal(startedNames(r), []string{"c"}) {
		t.Fatalf("restart started %v", startedNames(r))
	}
	h2.at(300 * time.Millisecond)
	if r := h2.finish("c", fail("http:503")); len(eventsOf(r, event.CircuitOpened)) != 1 {
		t.Fatalf("the third failure after the crash did not open it: %+v", breakerRec(h2))
	}
}

// TestBreakerCrashWhileOpen: after kill -9 while open, the breaker stays
// open until its recorded time, not a new break from the restart.
func TestBreakerCrashWhileOpen(t *testing.T) {
	w := breakerWorld(apiBreaker(3, 1), "a", "b", "c")
	h := newHarness(t, w, nil, t0)
	h.start()
	openIt(t, h)
	h.at(1100 * time.Millisecond)
	h.tick() // all three wait for the breaker
	h2 := newHarness(t, w, h.state, t0.Add(20*time.Second))
	r := h2.start()
	if len(r.Start) != 0 {
		t.Fatalf("restart while open started %v", startedNames(r))
	}
	if !r.Wake.Equal(halfOpenAt) {
		t.Fatalf("wake after restart = %v, want the recorded %v", r.Wake, halfOpenAt)
	}
	if pl := eventsOf(r, event.Plan); pl[0].Circuits[0].State != "open" || !pl[0].Circuits[0].HalfOpenAt.Equal(halfOpenAt) {
		t.Fatalf("plan circuits = %+v", pl[0].Circuits)
	}
	h2.now = halfOpenAt
	if r = h2.tick(); !slices.Equal(startedNames(r), []string{"a"}) {
		t.Fatalf("half-open after restart started %v", startedNames(r))
	}
	noStartWhileOpen(t, h2)
}

// TestBreakerCrashWhileHalfOpen: a trial in flight when wf died is
// interrupted (not counted); the breaker is still half-open and lets one
// trial through again.
func TestBreakerCrashWhileHalfOpen(t *testing.T) {
	w := breakerWorld(apiBreaker(3, 1), "a", "b", "c")
	h := newHarness(t, w, nil, t0)
	h.start()
	openIt(t, h)
	h.at(1100 * time.Millisecond)
	h.tick()
	h.now = halfOpenAt
	h.tick() // a is the trial; b and c wait for it
	if b := breakerRec(h); b.State != "half_open" {
		t.Fatalf("half-open not committed: %+v", b)
	}
	h2 := newHarness(t, w, h.state, halfOpenAt.Add(5*time.Second))
	r := h2.start()
	if got := startedNames(r); len(got) != 1 {
		t.Fatalf("restart half-open started %v, want one trial", got)
	}
	if len(eventsOf(r, event.CircuitWait)) != 2 {
		t.Fatalf("events = %v", types(r))
	}
	trial := startedNames(r)[0]
	h2.now = h2.now.Add(time.Second)
	if r = h2.finish(trial, nil); len(eventsOf(r, event.CircuitClosed)) != 1 || len(r.Start) != 2 {
		t.Fatalf("trial success after restart: events %v, start %v", types(r), startedNames(r))
	}
}

// TestBreakerFireNowWaitsForTheBreaker: a retry fired by hand while the
// breaker is open goes to the breaker like any other attempt.
func TestBreakerFireNowWaitsForTheBreaker(t *testing.T) {
	w := breakerWorld(apiBreaker(3, 1), "a", "b", "c")
	h := newHarness(t, w, nil, t0)
	h.start()
	openIt(t, h)
	r := h.record(h.c.FireNow(h.now, addr, "a"))
	if len(r.Start) != 0 || len(eventsOf(r, event.CircuitWait)) != 1 {
		t.Fatalf("fire now while open: start %v, events %v", startedNames(r), types(r))
	}
}

// windowCounts sums a breaker record's window: successes, failures.
func windowCounts(b *record.Breaker) [2]int {
	var out [2]int
	for _, bk := range b.Window {
		out[0] += bk.Successes
		out[1] += bk.Failures
	}
	return out
}

// TestBreakerNotUsedIsLeftAlone: a breaker no activity of the run goes
// through is neither shown, nor advanced, nor committed, nor woken for.
func TestBreakerNotUsedIsLeftAlone(t *testing.T) {
	st := newMemState()
	st.breakers["other"] = &record.Breaker{Name: "other", State: "open", HalfOpenAt: t0.Add(time.Second), Epoch: 1}
	w := &world{wf: workflow(execAct("a", []retry.Rule{{Policy: expo(time.Second, 3)}})),
		breakers: map[string]retry.Breaker{"other": apiBreaker(3, 1)}}
	h := newHarness(t, w, st, t0.Add(time.Minute))
	r := h.start()
	if pl := eventsOf(r, event.Plan); len(pl[0].Circuits) != 0 {
		t.Fatalf("plan circuits = %+v", pl[0].Circuits)
	}
	h.at(time.Minute + time.Second)
	r = h.finish("a", nil)
	for _, m := range r.Persist {
		if m.Breaker != nil {
			t.Fatalf("an unused breaker was committed: %+v", m.Breaker)
		}
	}
	if len(eventsOf(r, event.CircuitHalfOpen)) != 0 {
		t.Fatalf("events = %v", types(r))
	}
}
