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
	// breakerCalls counts the calls to the shared-breaker gate.
	breakerCalls int
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

// memBreakers answers breaker calls from in-memory books on the asking
// instance's clock: the shared-breaker path of the interpreter (the
// gate), with the breaker workflow's arithmetic, without a server.
type memBreakers struct {
	books map[string]*breakerBook
	calls int
}

func (m *memBreakers) call(_ context.Context, req BreakerRequest) (BreakerReply, error) {
	m.calls++
	b := m.books[req.Breaker.Name]
	if b == nil {
		b = newBreakerBook(BreakerInput{Name: req.Breaker.Name})
		m.books[req.Breaker.Name] = b
	}
	return b.call(req, req.Now), nil
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
	in := Input{Format: InputFormat, Workflow: wfName, Key: key, Parallelism: par, StateID: paritySeed, TaskQueue: "wf", SharedBudgets: true, SharedBreakers: true}
	gate := &memBudgets{stamps: map[string][]time.Time{}}
	breakers := &memBreakers{books: map[string]*breakerBook{}}
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
		env.RegisterActivityWithOptions(breakers.call, sdkactivity.RegisterOptions{Name: BreakerActivity})
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
		return run{state: &st, events: st.Events, takes: gate.takes, breakerCalls: breakers.calls}
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
				if strings.Contains(tc.hcl, "circuit_breaker") && got.breakerCalls == 0 {
					t.Errorf("%s: no pass was asked of the shared breaker", mode.name)
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
