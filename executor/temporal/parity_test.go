package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// outcome is what one scripted attempt does; the zero value succeeds.
type outcome struct {
	typ          string
	nonRetryable bool
	retryAfter   time.Duration
}

// script maps an activity to the outcomes of its attempts 1, 2, ...;
// attempts past the list succeed.
type script map[string][]outcome

func (s script) at(activity string, n int) outcome {
	if o := s[activity]; n >= 1 && n <= len(o) {
		return o[n-1]
	}
	return outcome{}
}

func (o outcome) failure() *activity.Failure {
	if o.typ == "" {
		return nil
	}
	return &activity.Failure{
		Type: o.typ, Message: "scripted " + o.typ, NonRetryable: o.nonRetryable,
		RetryAfter: o.retryAfter, HasRetryAfter: o.retryAfter > 0,
	}
}

func fail(typ string) outcome { return outcome{typ: typ} }

func fails(typ string, n int) []outcome {
	out := make([]outcome, n)
	for i := range out {
		out[i] = fail(typ)
	}
	return out
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const paritySeed = "0123456789abcdef0123456789abcdef"

// run is what one engine did: the records and the events of the run.
type run struct {
	state  *State
	events []event.Event
	// takes counts the budget tokens asked of the shared-budget gate.
	takes int
}

// runLocal runs the configuration through the core as the local shell
// does: each step's attempts end at once (in the same batch), and time
// jumps to the core's wake-up when nothing runs.
func runLocal(t *testing.T, src Sources, wfName string, sc script, par int) run {
	t.Helper()
	cfg, diags := src.Load()
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	var wf *config.Workflow
	for _, w := range cfg.Workflows {
		if w.Name == wfName {
			wf = w
		}
	}
	budgets := map[string]retry.Budget{}
	for name, b := range cfg.Budgets {
		budgets[name] = b.Budget
	}
	breakers := map[string]retry.Breaker{}
	for name, b := range cfg.Breakers {
		breakers[name] = b.Breaker
	}
	recs := newRecords(Carry{}, 0)
	c := core.New(core.Options{
		Instances:   []core.Instance{{Workflow: wf}},
		Budgets:     budgets,
		Breakers:    breakers,
		Parallelism: par,
		Seed:        paritySeed,
		StateID:     paritySeed,
		Activities:  map[string]map[string]*record.Activity{},
	})
	now := t0
	var evs []event.Event
	ready := c.Start(now)
	for step := 0; ; step++ {
		if step > 10000 {
			t.Fatal("local run does not end")
		}
		recs.apply(ready.Persist)
		evs = append(evs, ready.Events...)
		if ready.Done {
			s := recs.state()
			s.Status = ready.Status
			return run{state: s, events: evs}
		}
		if len(ready.Start) > 0 {
			var rs []core.Result
			for _, a := range ready.Start {
				o := sc.at(a.Activity, a.Number)
				r := core.Result{Workflow: a.Workflow, Instance: a.Instance, Activity: a.Activity, Number: a.Number, Start: now, End: now, Outputs: json.RawMessage(`{"ok":true}`)}
				if f := o.failure(); f != nil {
					rf := retry.Failure(*f)
					r.Failure = &rf
				}
				// The local engine's view of a lost attempt: cut short by
				// the engine (SPEC §4.1).
				r.Interrupted = o.typ == "interrupted"
				rs = append(rs, r)
			}
			ready = c.AttemptsDone(now, rs)
			continue
		}
		if ready.Wake.IsZero() {
			t.Fatalf("local run is stuck: nothing runs and no timer is armed")
		}
		now = ready.Wake
		ready = c.Tick(now)
	}
}

// fakeAttempts plays a script as the attempt activity would.
type fakeAttempts struct{ sc script }

func (f *fakeAttempts) Run(_ context.Context, in AttemptInput) (AttemptResult, error) {
	o := f.sc.at(in.Activity, in.Number)
	if o.typ == "interrupted" {
		// What Temporal reports when the worker died mid-attempt.
		return AttemptResult{}, sdktemporal.NewHeartbeatTimeoutError()
	}
	res := AttemptResult{Outputs: json.RawMessage(`{"ok":true}`), Failure: o.failure()}
	if res.Failure == nil {
		return res, nil
	}
	return AttemptResult{}, sdktemporal.NewNonRetryableApplicationError(res.Failure.Message, res.Failure.Type, nil, res)
}

// memBudgets answers budget takes from in-memory windows on the asking
// instance's clock: the shared-budget path of the interpreter (the gate),
// with the budget workflow's arithmetic, without a server.
type memBudgets struct {
	stamps map[string][]time.Time
	takes  int
}

func (m *memBudgets) take(_ context.Context, req TakeRequest) (TakeResult, error) {
	m.takes++
	return takeChain(m.stamps, req, req.Now), nil
}

type temporalRun struct {
	suite testsuite.WorkflowTestSuite
	// continueEveryStep makes Temporal suggest continue-as-new all the
	// time, so each run hands over after its first step.
	continueEveryStep bool
}

// runTemporal runs the interpreter in the SDK's test environment (mock
// clock, no server), following continue-as-new by hand.
func (tr *temporalRun) run(t *testing.T, src Sources, wfName, key string, sc script, par int) run {
	t.Helper()
	in := Input{Format: InputFormat, Workflow: wfName, Key: key, Parallelism: par, StateID: paritySeed, TaskQueue: "wf", SharedBudgets: true}
	gate := &memBudgets{stamps: map[string][]time.Time{}}
	in.SetSources(src)
	start := t0
	var runs int
	for {
		runs++
		if runs > 500 {
			t.Fatal("temporal run does not end")
		}
		env := tr.suite.NewTestWorkflowEnvironment()
		env.SetStartTime(start)
		env.SetContinueAsNewSuggested(tr.continueEveryStep)
		RegisterWorkflow(env)
		env.RegisterActivityWithOptions((&fakeAttempts{sc: sc}).Run, sdkactivity.RegisterOptions{Name: AttemptActivity})
		env.RegisterActivityWithOptions(gate.take, sdkactivity.RegisterOptions{Name: BudgetTakeActivity})
		env.ExecuteWorkflow(WorkflowType, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			var next Input
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
				t.Fatalf("decode continue-as-new input: %v", err)
			}
			in = next
			start = nextWake(in.Carry, env.Now())
			continue
		}
		if err != nil {
			t.Fatalf("workflow: %v", err)
		}
		var st State
		if err := env.GetWorkflowResult(&st); err != nil {
			t.Fatalf("result: %v", err)
		}
		return run{state: &st, events: st.Events, takes: gate.takes}
	}
}

// nextWake is when the next run of a continued apply sees time move on to:
// its earliest timer (a real server's clock would have reached it).
func nextWake(c Carry, now time.Time) time.Time {
	wake := time.Time{}
	for _, a := range c.Activities {
		if a.Timer != nil && (wake.IsZero() || a.Timer.FireAt.Before(wake)) {
			wake = a.Timer.FireAt
		}
	}
	if wake.Before(now) {
		return now
	}
	return wake
}

// attemptLine is one attempt as both engines must have recorded it.
func attemptLines(st *State) []string {
	var out []string
	for _, a := range st.Attempts {
		e := "-"
		if a.Error != nil {
			e = fmt.Sprintf("%s nr=%v", a.Error.Type, a.Error.NonRetryable)
		}
		wait := "-"
		if a.HasWait {
			wait = fmt.Sprintf("%s(%s)", a.Wait, a.WaitSource)
		}
		out = append(out, fmt.Sprintf("%s g%d #%d %s %s start+%s end+%s wait %s key %s",
			a.Activity, a.Generation, a.Number, a.Outcome, e, a.Start.Sub(t0), a.End.Sub(t0), wait, a.IdempotencyKey))
	}
	slices.Sort(out)
	return out
}

func activityLines(st *State) []string {
	var out []string
	for _, name := range sortedNames(st.Activities) {
		a := st.Activities[name]
		e := "-"
		if a.LastError != nil {
			e = a.LastError.Type
		}
		out = append(out, fmt.Sprintf("%s %s reason=%s attempts=%d error=%s finished+%s", name, a.Status, a.FailReason, a.Attempts, e, a.Finished.Sub(t0)))
	}
	return out
}

// eventLines are the per-activity event sequences (order across
// activities may differ with the batching of results; within one
// activity it may not).
func eventLines(evs []event.Event) []string {
	by := map[string][]string{}
	for _, e := range evs {
		if e.Activity == "" {
			continue
		}
		s := fmt.Sprintf("%s#%d", e.Type, e.Attempt)
		if e.DelayMs != nil {
			s += fmt.Sprintf(" delay=%d(%s)", *e.DelayMs, e.DelaySource)
		}
		if e.Error != nil {
			s += " " + e.Error.Type
		}
		if e.Reason != "" {
			s += " reason=" + e.Reason
		}
		by[e.Activity] = append(by[e.Activity], s)
	}
	var out []string
	for _, a := range sortedNames(by) {
		out = append(out, a+": "+strings.Join(by[a], ", "))
	}
	return out
}

type parityCase struct {
	name string
	hcl  string
	sc   script
	par  int
	// want checks the local run, so that a case proves something beyond
	// "both engines agree".
	want func(t *testing.T, r run)
}

// hclLines expands one-line blocks written "{ a = 1 ; b = 2 }" into the
// one-attribute-per-line form HCL requires.
func hclLines(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, " ; ") {
			line = strings.Replace(line, "{ ", "{\n", 1)
			line = strings.ReplaceAll(line, " ; ", "\n")
			line = line[:strings.LastIndex(line, " }")] + "\n}"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func one(body string) string {
	return `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["true"] }
` + body + `
  }
}
`
}

func waits(r run, activity string) []time.Duration {
	var out []time.Duration
	for _, a := range r.state.Attempts {
		if a.Activity == activity && a.HasWait {
			out = append(out, a.Wait)
		}
	}
	return out
}

func wantWaits(want ...time.Duration) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		if got := waits(r, "a"); !slices.Equal(got, want) {
			t.Errorf("waits of activity.a = %v, want %v", got, want)
		}
	}
}

func wantEnd(status record.Status, reason string, attempts int) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		a := r.state.Activities["a"]
		if a.Status != status || a.FailReason != reason || a.Attempts != attempts {
			t.Errorf("activity.a = %s reason %q after %d attempts, want %s %q after %d", a.Status, a.FailReason, a.Attempts, status, reason, attempts)
		}
	}
}

func all(fs ...func(*testing.T, run)) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		for _, f := range fs {
			f(t, r)
		}
	}
}

// jittered checks that waits vary and stay within [lo, hi].
func jittered(n int, lo, hi time.Duration) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		ws := waits(r, "a")
		if len(ws) != n {
			t.Fatalf("waits = %v, want %d of them", ws, n)
		}
		distinct := map[time.Duration]bool{}
		for _, w := range ws {
			distinct[w] = true
			if w < lo || w > hi {
				t.Errorf("wait %s outside [%s, %s]", w, lo, hi)
			}
		}
		if len(distinct) < 2 {
			t.Errorf("jittered waits are all equal: %v", ws)
		}
	}
}

var parityCases = []parityCase{
	{
		name: "exponential",
		hcl:  one(`retry { initial_interval = "1s" ; backoff_coefficient = 2 ; maximum_interval = "5s" ; maximum_attempts = 6 }`),
		sc:   script{"a": fails("exit:1", 4)},
		want: all(wantWaits(time.Second, 2*time.Second, 4*time.Second, 5*time.Second), wantEnd(record.StatusSucceeded, "", 5)),
	},
	{
		name: "linear",
		hcl:  one(`retry { backoff = "linear" ; initial_interval = "2s" ; maximum_attempts = 4 }`),
		sc:   script{"a": fails("exit:1", 9)},
		want: all(wantWaits(2*time.Second, 4*time.Second, 6*time.Second), wantEnd(record.StatusFailed, "max_attempts", 4)),
	},
	{
		name: "fixed",
		hcl:  one(`retry { backoff = "fixed" ; initial_interval = "3s" ; maximum_attempts = 3 }`),
		sc:   script{"a": fails("http:503", 9)},
		want: all(wantWaits(3*time.Second, 3*time.Second), wantEnd(record.StatusFailed, "max_attempts", 3)),
	},
	{
		name: "jitter full",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_interval = "8s" ; maximum_attempts = 6 ; jitter = "full" }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, 0, 8*time.Second),
	},
	{
		name: "jitter equal",
		hcl:  one(`retry { initial_interval = "2s" ; backoff = "fixed" ; maximum_attempts = 6 ; jitter = "equal" }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, time.Second, 2*time.Second),
	},
	{
		name: "jitter decorrelated",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_interval = "20s" ; maximum_attempts = 6 ; jitter = "decorrelated" }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, time.Second, 20*time.Second),
	},
	{
		name: "jitter fraction",
		hcl:  one(`retry { initial_interval = "10s" ; backoff = "fixed" ; maximum_attempts = 6 ; jitter = 0.5 }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, 5*time.Second, 15*time.Second),
	},
	{
		name: "ordered rules",
		hcl: one(`
    retry {
      on = ["http:429"]
      backoff = "fixed"
      initial_interval = "5s"
      maximum_attempts = 3
    }
    retry {
      initial_interval = "1s"
      maximum_attempts = 4
    }`),
		sc:   script{"a": {fail("http:429"), fail("http:503"), fail("http:429"), fail("http:503"), fail("http:429")}},
		want: all(wantWaits(5*time.Second, time.Second, 5*time.Second, 2*time.Second), wantEnd(record.StatusFailed, "max_attempts", 5)),
	},
	{
		name: "retry_if",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 10 ; retry_if = error.type != "Fraud" && attempt < 3 }`),
		sc:   script{"a": fails("exit:1", 9)},
		want: wantEnd(record.StatusFailed, "retry_if", 3),
	},
	{
		name: "retry_if error type",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 10 ; retry_if = error.type != "Fraud" }`),
		sc:   script{"a": {fail("exit:1"), fail("Fraud")}},
		want: wantEnd(record.StatusFailed, "retry_if", 2),
	},
	{
		name: "retry-after",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 3 }`),
		sc:   script{"a": {{typ: "http:429", retryAfter: 7 * time.Second}}},
		want: all(wantWaits(7*time.Second), wantEnd(record.StatusSucceeded, "", 2)),
	},
	{
		name: "budget wait",
		hcl: `
retry_budget "b" {
  max_retries  = 1
  window       = "10s"
  on_exhausted = "wait"
}
` + one(`retry { initial_interval = "1s" ; backoff = "fixed" ; maximum_attempts = 5 ; budget = retry_budget.b }`),
		sc: script{"a": fails("http:503", 3)},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 4)(t, r)
			var sources []string
			for _, a := range r.state.Attempts {
				if a.HasWait {
					sources = append(sources, a.WaitSource)
				}
			}
			if !slices.Contains(sources, "budget") {
				t.Errorf("no retry waited for the budget: %v", sources)
			}
		},
	},
	{
		name: "budget fail",
		hcl: `
retry_budget "b" {
  max_retries  = 1
  window       = "1m"
  on_exhausted = "fail"
}
` + one(`retry { initial_interval = "1s" ; maximum_attempts = 5 ; budget = retry_budget.b }`),
		sc:   script{"a": fails("http:503", 9)},
		want: wantEnd(record.StatusFailed, "budget_exhausted", 2),
	},
	{
		name: "budget nested",
		hcl: `
retry_budget "org" {
  max_retries  = 1
  window       = "10s"
  on_exhausted = "wait"
}
retry_budget "b" {
  max_retries = 5
  window      = "1m"
  parent      = retry_budget.org
}
` + one(`retry { initial_interval = "1s" ; backoff = "fixed" ; maximum_attempts = 5 ; budget = retry_budget.b }`),
		sc: script{"a": fails("http:503", 2)},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 3)(t, r)
			// The second retry waits for the parent, though b has tokens.
			if got := waits(r, "a"); len(got) != 2 || got[0] != time.Second || got[1] < 9*time.Second {
				t.Errorf("waits = %v, want 1s then the parent's window", got)
			}
		},
	},
	{
		name: "circuit breaker",
		hcl: `
circuit_breaker "api" {
  minimum_calls  = 2
  failure_ratio  = 0.5
  window         = "1m"
  break_duration = "10s"
}
` + one(`retry { initial_interval = "1s" ; backoff = "fixed" ; maximum_attempts = 6 ; circuit_breaker = circuit_breaker.api }`),
		sc: script{"a": fails("http:503", 3)},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 4)(t, r)
			var circuit int
			for _, e := range r.events {
				if e.Type == event.CircuitWait {
					circuit++
				}
			}
			// Attempt 2 opens it; retries 3 and 4 wait for the ends of
			// the breaks (attempt 3 is the trial that fails).
			if circuit != 2 {
				t.Errorf("circuit waits = %d, want 2", circuit)
			}
			if a := r.state.Attempts; a[len(a)-1].Start.Sub(a[1].End) < 20*time.Second {
				t.Errorf("the last attempt started %s after the breaker opened, want two breaks", a[len(a)-1].Start.Sub(a[1].End))
			}
		},
	},
	{
		name: "expiration",
		hcl:  one(`retry { backoff = "fixed" ; initial_interval = "2s" ; expiration = "5s" }`),
		sc:   script{"a": fails("exit:1", 99)},
		want: all(wantWaits(2*time.Second, 2*time.Second), wantEnd(record.StatusFailed, "expired", 3)),
	},
	{
		name: "non-retryable pattern",
		hcl:  one(`retry { maximum_attempts = 5 ; non_retryable_errors = ["Card*"] }`),
		sc:   script{"a": {fail("CardDeclined")}},
		want: wantEnd(record.StatusFailed, "non_retryable", 1),
	},
	{
		name: "non-retryable flag",
		hcl:  one(`retry { maximum_attempts = 5 }`),
		sc:   script{"a": {{typ: "Fatal", nonRetryable: true}}},
		want: wantEnd(record.StatusFailed, "non_retryable", 1),
	},
	{
		name: "interrupted",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 3 }`),
		sc:   script{"a": {fail("interrupted")}},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 2)(t, r)
			if got := r.state.Attempts[0]; got.Outcome != record.OutcomeInterrupted || got.IdempotencyKey != r.state.Attempts[1].IdempotencyKey {
				t.Errorf("attempt 1 = %s with key %s, attempt 2 key %s: want interrupted, same key", got.Outcome, got.IdempotencyKey, r.state.Attempts[1].IdempotencyKey)
			}
		},
	},
	{
		name: "graph with parallel jittered failures",
		hcl: `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["true"] }
    retry { initial_interval = "1s" ; maximum_attempts = 5 ; jitter = "full" }
  }
  activity "b" {
    exec { command = ["true"] }
    retry { initial_interval = "1s" ; maximum_attempts = 5 ; jitter = "full" }
  }
  activity "c" {
    exec { command = ["echo", activity.a.stdout] }
    depends_on = [activity.b]
    retry { initial_interval = "1s" ; maximum_attempts = 2 }
  }
  activity "d" {
    sleep { duration = "3s" }
    depends_on = [activity.c]
  }
  activity "e" {
    exec { command = ["true"] }
    depends_on = [activity.d]
  }
}
`,
		sc:  script{"a": fails("exit:1", 3), "b": fails("exit:2", 2), "c": fails("exit:3", 2)},
		par: 2,
		want: func(t *testing.T, r run) {
			if st := r.state.Activities["c"].Status; st != record.StatusFailed {
				t.Errorf("activity.c = %s, want failed", st)
			}
			for _, n := range []string{"d", "e"} {
				if st := r.state.Activities[n].Status; st != record.StatusSkipped {
					t.Errorf("activity.%s = %s, want skipped", n, st)
				}
			}
		},
	},
}

// TestParity runs every retry scenario on the local core and on the
// Temporal interpreter (SDK test environment, mock clock) with the same
// seed, and asserts the same attempts (numbers, outcomes, error types,
// times, waits and their sources, keys), the same final records and the
// same per-activity event sequences; then again with the interpreter
// continuing as new after every step.
func TestParity(t *testing.T) {
	for _, tc := range parityCases {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{Files: map[string][]byte{"main.wf.hcl": []byte(hclLines(tc.hcl))}}
			par := orDefault(tc.par, 10)
			local := runLocal(t, src, "w", tc.sc, par)
			if tc.want != nil {
				tc.want(t, local)
			}
			for _, mode := range []struct {
				name string
				tr   temporalRun
			}{{"temporal", temporalRun{}}, {"temporal continue-as-new", temporalRun{continueEveryStep: true}}} {
				mode.tr.suite.SetLogger(quietLogger())
				got := mode.tr.run(t, src, "w", "k", tc.sc, par)
				if strings.HasPrefix(tc.name, "budget") && got.takes == 0 {
					t.Errorf("%s: no retry token was asked of the shared budget", mode.name)
				}
				if mode.tr.continueEveryStep && len(waits(local, "a")) > 0 && got.state.Runs < 2 {
					t.Errorf("%s: the apply took %d run(s); want it continued as new", mode.name, got.state.Runs)
				}
				compare(t, mode.name+" attempts", attemptLines(local.state), attemptLines(got.state))
				compare(t, mode.name+" activities", activityLines(local.state), activityLines(got.state))
				compare(t, mode.name+" events", eventLines(local.events), eventLines(got.events))
				if got.state.Status != local.status() {
					t.Errorf("%s: status %q, local %q", mode.name, got.state.Status, local.status())
				}
			}
		})
	}
}

// sortedNames returns the keys of m in order.
func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func (r run) status() string { return r.state.Status }

func compare(t *testing.T, what string, want, got []string) {
	t.Helper()
	if slices.Equal(want, got) {
		return
	}
	t.Errorf("%s differ from the local engine:\nlocal:\n  %s\ntemporal:\n  %s", what, strings.Join(want, "\n  "), strings.Join(got, "\n  "))
}

func TestWorkerDir(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{ConfigRoot, "/checkout"},
		{ConfigRoot + "/scripts", "/checkout/scripts"},
		{"/opt/tools", "/opt/tools"},
		{"/wf-configuration", "/wf-configuration"},
	} {
		if got := WorkerDir(tc.spec, "/checkout"); got != tc.want {
			t.Errorf("WorkerDir(%q) = %q, want %q", tc.spec, got, tc.want)
		}
	}
}
