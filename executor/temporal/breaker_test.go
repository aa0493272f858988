package temporal

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/retry"
)

type breakerResult struct {
	res BreakerReply
	err error
	set bool
}

type breakerCallbacks struct{ r *breakerResult }

func (u breakerCallbacks) Accept()          {}
func (u breakerCallbacks) Reject(err error) { u.r.err, u.r.set = err, true }
func (u breakerCallbacks) Complete(v any, err error) {
	u.r.set, u.r.err = true, err
	if res, ok := v.(BreakerReply); ok {
		u.r.res = res
	}
}

var testBreaker = retry.Breaker{Name: "api", FailureRatio: 0.5, MinimumCalls: 2, Window: time.Minute, BreakDuration: 10 * time.Second, HalfOpenCalls: 1}

type breakerStep struct {
	at      time.Duration
	op      string
	holder  string
	ticket  int
	outcome retry.Outcome
	lease   time.Duration
	// want: granted, the state after, when to ask again.
	ok    bool
	state retry.CircuitState
	wait  time.Duration
}

// runBreakerSteps sends the steps as updates to one breaker workflow and
// checks each answer; it returns the environment once the workflow ended.
func runBreakerSteps(t *testing.T, in BreakerInput, steps []breakerStep, after func(env *testsuite.TestWorkflowEnvironment)) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	env.RegisterWorkflowWithOptions(BreakerWorkflow, workflow.RegisterOptions{Name: BreakerWorkflowType})
	got := make([]breakerResult, len(steps))
	for i, st := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(BreakerUpdate, "call-"+string(rune('a'+i)), breakerCallbacks{&got[i]}, BreakerRequest{
				Op: st.op, Breaker: testBreaker, Holder: st.holder, Ticket: st.ticket, Outcome: st.outcome, Lease: st.lease,
			})
		}, st.at)
	}
	if after != nil {
		after(env)
	}
	env.ExecuteWorkflow(BreakerWorkflowType, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the breaker workflow did not end")
	}
	for i, st := range steps {
		r := got[i]
		if !r.set || r.err != nil {
			t.Fatalf("call %d (%s at +%s): no answer (err %v)", i+1, st.op, st.at, r.err)
		}
		var wait time.Duration
		if !r.res.Wait.IsZero() {
			wait = r.res.Wait.Sub(t0)
		}
		if r.res.OK != st.ok || r.res.Circuit.State != st.state || wait != st.wait {
			t.Errorf("call %d (%s %s at +%s) = ok %v, %s, wait +%s; want ok %v, %s, wait +%s",
				i+1, st.op, st.holder, st.at, r.res.OK, r.res.Circuit.State, wait, st.ok, st.state, st.wait)
		}
	}
	return env
}

// TestBreakerWorkflow: one breaker workflow opens on the failures of two
// holders (two instances), refuses every ask while open and names the end
// of the break, lets one trial through when half-open and makes the others
// poll, closes on the trial's success, and ends once idle.
func TestBreakerWorkflow(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	steps := []breakerStep{
		{at: 1 * s, op: BreakerAsk, holder: "i1/a", ok: true, state: retry.CircuitClosed},
		{at: 1*s + ms, op: BreakerDone, holder: "i1/a", outcome: retry.OutcomeFailure, state: retry.CircuitClosed},
		{at: 2 * s, op: BreakerAsk, holder: "i2/a", ok: true, state: retry.CircuitClosed},
		// The second instance's failure opens it: two calls, both failed.
		{at: 2*s + ms, op: BreakerDone, holder: "i2/a", outcome: retry.OutcomeFailure, state: retry.CircuitOpen},
		{at: 3 * s, op: BreakerAsk, holder: "i1/a", state: retry.CircuitOpen, wait: 12*s + ms},
		{at: 4 * s, op: BreakerAsk, holder: "i2/a", state: retry.CircuitOpen, wait: 12*s + ms},
		{at: 12*s + ms, op: BreakerAsk, holder: "i1/a", ok: true, ticket: 0, state: retry.CircuitHalfOpen},
		// The one trial slot is taken: poll.
		{at: 12*s + 500*time.Millisecond, op: BreakerAsk, holder: "i2/a", state: retry.CircuitHalfOpen, wait: 13*s + 500*time.Millisecond},
		{at: 13 * s, op: BreakerDone, holder: "i1/a", ticket: 2, outcome: retry.OutcomeSuccess, state: retry.CircuitClosed},
		{at: 14 * s, op: BreakerAsk, holder: "i2/a", ok: true, state: retry.CircuitClosed},
	}
	env := runBreakerSteps(t, BreakerInput{Name: "api"}, steps, nil)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("breaker workflow: %v", err)
	}
}

// TestBreakerWorkflowLease: a trial pass whose holder never reports (its
// instance was terminated) frees its slot once its lease ends; an outcome
// from an earlier epoch changes nothing.
func TestBreakerWorkflowLease(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	open := BreakerInput{Name: "api", Config: testBreaker, Circuit: retry.Circuit{State: retry.CircuitOpen, Since: t0, HalfOpenAt: t0.Add(5 * s), Epoch: 1}}
	steps := []breakerStep{
		{at: 6 * s, op: BreakerAsk, holder: "gone/a", lease: 90 * s, ok: true, state: retry.CircuitHalfOpen},
		{at: 7 * s, op: BreakerAsk, holder: "i2/a", state: retry.CircuitHalfOpen, wait: 8 * s},
		// An attempt let through before the breaker opened fails late.
		{at: 8 * s, op: BreakerDone, holder: "old/a", ticket: 0, outcome: retry.OutcomeFailure, state: retry.CircuitHalfOpen},
		{at: 95 * s, op: BreakerAsk, holder: "i2/a", state: retry.CircuitHalfOpen, wait: 96 * s},
		{at: 96*s + ms, op: BreakerAsk, holder: "i2/a", ok: true, state: retry.CircuitHalfOpen},
		{at: 97 * s, op: BreakerDone, holder: "i2/a", ticket: 2, outcome: retry.OutcomeFailure, state: retry.CircuitOpen},
		{at: 108 * s, op: BreakerAsk, holder: "i2/a", ok: true, state: retry.CircuitHalfOpen},
		{at: 109 * s, op: BreakerDone, holder: "i2/a", ticket: 4, outcome: retry.OutcomeSuccess, state: retry.CircuitClosed},
	}
	runBreakerSteps(t, open, steps, nil)
}

// TestBreakerWorkflowContinueAsNew: a breaker workflow continued as new
// carries its state: the circuit, its window, the trial passes in flight
// and how often it opened.
func TestBreakerWorkflowContinueAsNew(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	steps := []breakerStep{
		{at: 1 * s, op: BreakerAsk, holder: "i1/a", ok: true, state: retry.CircuitClosed},
		{at: 1*s + ms, op: BreakerDone, holder: "i1/a", outcome: retry.OutcomeFailure, state: retry.CircuitClosed},
		{at: 2 * s, op: BreakerAsk, holder: "i2/a", ok: true, state: retry.CircuitClosed},
		{at: 2*s + ms, op: BreakerDone, holder: "i2/a", outcome: retry.OutcomeFailure, state: retry.CircuitOpen},
		{at: 13 * s, op: BreakerAsk, holder: "i1/a", ok: true, state: retry.CircuitHalfOpen},
	}
	env := runBreakerSteps(t, BreakerInput{Name: "api"}, steps, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, 14*s)
	})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("breaker workflow ended with %v, want continue-as-new", err)
	}
	var next BreakerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatalf("decode continue-as-new input: %v", err)
	}
	if next.Circuit.State != retry.CircuitHalfOpen || next.Circuit.Epoch != 2 || next.Opened != 1 || len(next.Trials) != 1 || next.Calls != 5 {
		t.Errorf("carried %+v; want half-open in epoch 2, opened once, one trial in flight, 5 calls", next)
	}
	if _, ok := next.Trials["i1/a"]; !ok {
		t.Errorf("carried trials %v, want i1/a's", next.Trials)
	}
	if len(next.Transitions) != 2 || next.Transitions[0].State != "open" || next.Transitions[0].Calls != 2 || next.Transitions[0].Failures != 2 {
		t.Errorf("carried transitions %+v; want open (2 calls, 2 failures), half_open", next.Transitions)
	}
}

// flakyBreakers is a breaker that cannot be reached for its first calls
// (the breaker workflow's worker is gone, the server refuses updates).
type flakyBreakers struct {
	memBreakers
	down int
}

func (f *flakyBreakers) call(ctx context.Context, req BreakerRequest) (BreakerReply, error) {
	if f.down > 0 {
		f.down--
		return BreakerReply{}, errors.New("cannot reach the breaker workflow")
	}
	return f.memBreakers.call(ctx, req)
}

// TestUnreachableBreakerWaits: while its breaker workflow cannot be
// reached, an attempt behind the breaker waits (the call is retried by
// Temporal) and never fails; once it answers, the activity runs and
// succeeds with one attempt.
func TestUnreachableBreakerWaits(t *testing.T) {
	src := Sources{Files: map[string][]byte{"main.wf.hcl": []byte(hclLines(`
circuit_breaker "api" {}
` + one(`retry { circuit_breaker = circuit_breaker.api }`)))}}
	in := Input{Format: InputFormat, Workflow: "w", Key: "k", StateID: paritySeed, TaskQueue: "wf", SharedBreakers: true}
	in.SetSources(src)
	breakers := &flakyBreakers{memBreakers: memBreakers{books: map[string]*breakerBook{}}, down: 6}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	RegisterWorkflow(env)
	env.RegisterActivityWithOptions((&fakeAttempts{sc: script{}}).Run, sdkactivity.RegisterOptions{Name: AttemptActivity})
	env.RegisterActivityWithOptions(breakers.call, sdkactivity.RegisterOptions{Name: BreakerActivity})
	env.ExecuteWorkflow(WorkflowType, in)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("interpreter: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st State
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if breakers.down != 0 || breakers.calls < 2 {
		t.Fatalf("the breaker was down for %d more calls and answered %d; want it reached after its outage", breakers.down, breakers.calls)
	}
	if st.Status != "succeeded" || len(st.Attempts) != 1 || st.Attempts[0].Error != nil {
		t.Fatalf("status %q, attempts %+v; want one successful attempt", st.Status, st.Attempts)
	}
	if end := env.Now(); end.Sub(t0) < time.Second {
		t.Errorf("the run ended %s after it started: the attempt did not wait for the breaker", end.Sub(t0))
	}
}
