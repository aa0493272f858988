package core

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// The language together with the gates of SPEC §11: for_each elements
// behind one circuit breaker, and compensation (any_failed + when) behind
// the breaker its failing upstream opened.

// gatedHarness runs a core over a loaded configuration with its circuit
// breakers, as executor.Run wires them.
func gatedHarness(t *testing.T, src string) *harness {
	t.Helper()
	cfg, diags := config.LoadFiles("cfg", map[string][]byte{"main.wf.hcl": []byte(src)}, config.LoadOptions{})
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	st := newMemState()
	breakers := map[string]retry.Breaker{}
	for name, b := range cfg.Breakers {
		breakers[name] = b.Breaker
	}
	wf := cfg.Workflows[0]
	opts := Options{
		Instances:     []Instance{{Workflow: wf}},
		Breakers:      breakers,
		BreakerState:  st.breakers,
		Rand:          rand.New(rand.NewPCG(1, 7)),
		Activities:    st.acts,
		BudgetState:   st.budgets,
		InstanceState: st.insts,
		StateID:       testStateID,
	}
	h := &harness{t: t, state: st, now: t0, starts: map[string]Attempt{}, wf: wf, opts: opts}
	h.c = New(opts)
	return h
}

const gatedBreaker = `
circuit_breaker "api" {
  failure_ratio   = 0.5
  minimum_calls   = 3
  window          = "30s"
  break_duration  = "30s"
  half_open_calls = 1
}
retry_policy "api" {
  backoff          = "fixed"
  initial_interval = "1s"
  maximum_attempts = 10
  circuit_breaker  = circuit_breaker.api
}
`

// TestForEachBehindBreaker: three elements of a static for_each open the
// breaker; the elements of a second for_each, known only when an upstream
// result arrives, expand while it is open: none of their first attempts
// starts, each waits (durably, not counted) for the end of the break, one
// trial goes through at half-open and its success lets every other
// element go. Each element keeps its own attempts and idempotency key.
func TestForEachBehindBreaker(t *testing.T) {
	h := gatedHarness(t, gatedBreaker+`workflow "w" {
  activity "warm" {
    for_each = toset(["x", "y", "z"])
    exec { command = ["warm", each.key] }
    retry { policy = retry_policy.api }
  }
  activity "list" {
    exec { command = ["list"] }
  }
  activity "fetch" {
    for_each = toset(activity.list.result)
    exec { command = ["fetch", each.key] }
    retry { policy = retry_policy.api }
  }
}`)
	r := h.start()
	if got := strings.Join(sortedStarted(r), " "); got != `list warm["x"] warm["y"] warm["z"]` {
		t.Fatalf("started %s", got)
	}
	h.at(100 * time.Millisecond)
	h.finish(`warm["x"]`, fail("exit:1"))
	h.finish(`warm["y"]`, fail("exit:1"))
	r = h.finish(`warm["z"]`, fail("exit:1"))
	if len(eventsOf(r, event.CircuitOpened)) != 1 {
		t.Fatalf("three element failures did not open the breaker: %v", types(r))
	}
	open := t0.Add(30*time.Second + 100*time.Millisecond)

	// The collection arrives while the breaker is open.
	h.at(200 * time.Millisecond)
	r = h.succeed("list", `{"result":["a","b"]}`)
	if len(r.Start) != 0 {
		t.Fatalf("elements started while the breaker was open: %v", sortedStarted(r))
	}
	if exp := eventsOf(r, event.ActivityExpanded); len(exp) != 1 || len(exp[0].Activities) != 2 {
		t.Fatalf("expanded %+v", exp)
	}
	waits := map[string]bool{}
	for _, e := range eventsOf(r, event.CircuitWait) {
		if e.Breaker != "api" || e.Attempt != 1 || e.FireAt == nil || !e.FireAt.Equal(open) {
			t.Errorf("circuit_wait %+v", e)
		}
		waits[e.Activity] = true
	}
	if !waits[`activity.fetch["a"]`] || !waits[`activity.fetch["b"]`] || len(waits) != 2 {
		t.Fatalf("circuit_wait for %v, want both fetch elements by address", waits)
	}
	for _, k := range []string{"a", "b"} {
		rec := h.state.activity(daddr, `fetch["`+k+`"]`)
		if rec == nil || rec.Timer == nil || rec.Timer.Kind != record.TimerCircuit || !rec.Timer.FireAt.Equal(open) || rec.Attempts != 0 {
			t.Fatalf("fetch[%q] = %+v, want a durable circuit timer and no attempt yet", k, rec)
		}
	}
	// The earliest timer is now the warm retries' (+1.1s), not the break.
	if want := t0.Add(1100 * time.Millisecond); !r.Wake.Equal(want) {
		t.Errorf("wake %v, want %v", r.Wake, want)
	}

	// The warm retries come due and wait too.
	h.at(1100 * time.Millisecond)
	if r = h.tick(); len(r.Start) != 0 {
		t.Fatalf("started %v while open", sortedStarted(r))
	}

	// Half-open: one trial among the five waiting elements.
	h.now = open
	r = h.tick()
	if len(r.Start) != 1 {
		t.Fatalf("half-open started %v, want one trial", sortedStarted(r))
	}
	trial := r.Start[0].Activity
	h.now = open.Add(100 * time.Millisecond)
	r = h.finish(trial, nil)
	if len(eventsOf(r, event.CircuitClosed)) != 1 {
		t.Fatalf("the trial's success did not close the breaker: %v", types(r))
	}
	if len(r.Start) != 4 {
		t.Fatalf("after closing started %v, want the other four", sortedStarted(r))
	}
	keys := map[string]bool{}
	for _, s := range r.Start {
		keys[s.IdempotencyKey] = true
	}
	if len(keys) != 4 {
		t.Errorf("elements share idempotency keys: %v", keys)
	}
	for _, s := range r.Start {
		h.finish(s.Activity, nil)
	}
	done := h.eventsOf(event.RunCompleted)
	if len(done) != 1 || done[0].Status != event.StatusSucceeded || done[0].Summary.Activities != 6 {
		t.Fatalf("run completed %+v", done)
	}
	// Waiting counted nothing: warm elements made 2 attempts, fetch ones 1.
	for name, want := range map[string]int{`warm["x"]`: 2, `warm["y"]`: 2, `warm["z"]`: 2, `fetch["a"]`: 1, `fetch["b"]`: 1} {
		if rec := h.state.activity(daddr, name); rec.Attempts != want || rec.Status != record.StatusSucceeded {
			t.Errorf("%s: %d attempts, %s; want %d, succeeded", name, rec.Attempts, rec.Status, want)
		}
	}
}

// TestCompensationBehindBreaker is the payment example's shape: ship's
// failures open the breaker both it and refund go through; ship fails for
// good on the half-open trial, which opens the breaker again; refund
// (any_failed, when ship failed) then waits for the next half-open instead
// of failing, goes through as the trial, closes the breaker, and its
// success handles ship's failure: the run succeeds.
func TestCompensationBehindBreaker(t *testing.T) {
	h := gatedHarness(t, `
circuit_breaker "api" {
  failure_ratio   = 0.5
  minimum_calls   = 3
  window          = "30s"
  break_duration  = "10s"
  half_open_calls = 1
}
retry_policy "payment" {
  backoff          = "fixed"
  initial_interval = "1s"
  maximum_attempts = 3
  circuit_breaker  = circuit_breaker.api
}
workflow "w" {
  activity "charge" {
    exec { command = ["charge"] }
    retry { policy = retry_policy.payment }
  }
  activity "ship" {
    exec { command = ["ship", activity.charge.stdout] }
    retry { policy = retry_policy.payment }
  }
  activity "refund" {
    trigger_rule = "any_failed"
    when         = activity.ship.status == "failed"
    exec { command = ["refund", activity.charge.stdout, activity.ship.error.type] }
    retry { policy = retry_policy.payment }
  }
}`)
	h.start()
	h.succeed("charge", `{"stdout":"ch_1"}`)
	h.at(time.Second)
	h.finish("ship", fail("exit:1"))
	h.at(2 * time.Second)
	h.tick()
	r := h.finish("ship", fail("exit:1"))
	if len(eventsOf(r, event.CircuitOpened)) != 1 {
		t.Fatalf("1 success and 2 failures did not open the breaker: %v", types(r))
	}
	// Ship's third attempt waits for half-open (+12s) and is the trial.
	h.at(3 * time.Second)
	if r = h.tick(); len(r.Start) != 0 {
		t.Fatalf("started %v while open", sortedStarted(r))
	}
	h.at(12 * time.Second)
	if r = h.tick(); strings.Join(sortedStarted(r), ",") != "ship" {
		t.Fatalf("half-open started %v, want ship", sortedStarted(r))
	}
	h.at(12*time.Second + 100*time.Millisecond)
	r = h.finish("ship", fail("exit:1"))
	if f := eventsOf(r, event.ActivityFailed); len(f) != 1 || f[0].Activity != "activity.ship" {
		t.Fatalf("ship did not fail for good: %v", types(r))
	}
	if len(eventsOf(r, event.CircuitOpened)) != 1 {
		t.Fatalf("the failed trial did not reopen the breaker: %v", types(r))
	}
	if len(r.Start) != 0 {
		t.Fatalf("refund started through an open breaker: %v", sortedStarted(r))
	}
	reopen := t0.Add(22*time.Second + 100*time.Millisecond)
	w := eventsOf(r, event.CircuitWait)
	if len(w) != 1 || w[0].Activity != "activity.refund" || w[0].FireAt == nil || !w[0].FireAt.Equal(reopen) {
		t.Fatalf("refund's wait %+v", w)
	}
	if rec := h.state.activity(daddr, "refund"); rec == nil || rec.Timer == nil || rec.Timer.Kind != record.TimerCircuit {
		t.Fatalf("refund record %+v, want a durable circuit timer", rec)
	}
	h.now = reopen
	r = h.tick()
	if len(r.Start) != 1 || strings.Join(r.Start[0].Spec.Exec.Command, " ") != "refund ch_1 exit:1" {
		t.Fatalf("refund trial %+v", r.Start)
	}
	r = h.succeed("refund", `{}`)
	if len(eventsOf(r, event.CircuitClosed)) != 1 {
		t.Errorf("refund's success did not close the breaker: %v", types(r))
	}
	done := eventsOf(r, event.RunCompleted)
	if len(done) != 1 || done[0].Status != event.StatusSucceeded {
		t.Fatalf("run completed %+v: ship's failure was handled by refund", done)
	}
	if rec := h.state.activity(daddr, "refund"); rec.Attempts != 1 {
		t.Errorf("refund made %d attempts, want 1 (waiting is not an attempt)", rec.Attempts)
	}
}
