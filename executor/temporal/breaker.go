package temporal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Cluster-wide circuit breakers: one small workflow per breaker owns its
// state (the window, open/half-open/closed, the trial calls in flight),
// and every instance asks it before each attempt behind the breaker and
// tells it how the attempt ended, so that every instance and worker sees
// one breaker: it opens on the failures of all instances, and while it is
// open no attempt behind it starts anywhere.
const (
	// BreakerWorkflowType is the workflow of one breaker.
	BreakerWorkflowType = "wf-breaker"
	// BreakerUpdate is one call to a breaker workflow: ask, done or cancel.
	BreakerUpdate = "call"
	// BreakerQuery answers a breaker workflow's state (BreakerView).
	BreakerQuery = "wf.breaker"
	// BreakerActivity sends BreakerUpdate (update-with-start) from a
	// worker on behalf of an interpreter.
	BreakerActivity = "wf-breaker-call"
	// breakerCallsPerRun is how many calls a breaker workflow answers
	// before it continues as new: each costs a few history events.
	breakerCallsPerRun = 500
	// breakerPoll is how soon an attempt refused because every trial
	// slot is taken asks again: a slot freed by another instance is not
	// told to it.
	breakerPoll = time.Second
	// keptTransitions is how many of its last transitions a breaker
	// workflow keeps, for wf state show.
	keptTransitions = 20
)

// BreakerWorkflowID is the workflow ID of a breaker.
func BreakerWorkflowID(name string) string { return "wf-breaker/" + name }

// Breaker call operations.
const (
	BreakerAsk    = "ask"
	BreakerDone   = "done"
	BreakerCancel = "cancel"
)

// BreakerRequest is one call to a breaker.
type BreakerRequest struct {
	// ID identifies the call: a retried call gets the same answer.
	ID string `json:"id"`
	// Op is BreakerAsk, BreakerDone or BreakerCancel.
	Op string `json:"op"`
	// Breaker is the breaker as the asking instance's configuration has
	// it; the breaker workflow applies the latest one it was sent.
	Breaker retry.Breaker `json:"breaker"`
	// Holder names the asking attempt (instance workflow ID and
	// activity): a trial pass is held by it until its done or cancel.
	Holder string `json:"holder"`
	// Ticket is the epoch the pass was granted in (done, cancel);
	// Outcome how the attempt ended (done).
	Ticket  int           `json:"ticket,omitempty"`
	Outcome retry.Outcome `json:"outcome,omitempty"`
	// Lease is how long a trial pass stays held without a done: an
	// instance that vanished (terminated) frees its slot after it.
	Lease time.Duration `json:"lease,omitempty"`
	// Now is the asking instance's time. The breaker workflow keeps its
	// own clock and ignores it; an in-memory breaker (tests) uses it.
	Now time.Time `json:"now"`
}

// BreakerReply is a breaker's answer: the pass (ask), when to ask again
// after a refusal, and its state after the call.
type BreakerReply struct {
	OK      bool          `json:"ok"`
	Ticket  int           `json:"ticket"`
	Wait    time.Time     `json:"wait,omitzero"`
	Circuit retry.Circuit `json:"circuit"`
	Trials  int           `json:"trials,omitempty"`
}

// BreakerTransition is one change of a breaker's state.
type BreakerTransition struct {
	Time  time.Time `json:"time"`
	State string    `json:"state"`
	Epoch int       `json:"epoch"`
	// Calls and Failures: the window that opened it (open).
	Calls    int `json:"calls,omitempty"`
	Failures int `json:"failures,omitempty"`
}

// BreakerInput is the input of a breaker workflow: its state so far.
type BreakerInput struct {
	Name    string        `json:"name"`
	Circuit retry.Circuit `json:"circuit"`
	// Trials are the holders of trial passes in flight, with when their
	// lease ends.
	Trials map[string]time.Time `json:"trials,omitempty"`
	// Opened counts the times it opened; Transitions are the last ones.
	Opened      int                 `json:"opened,omitempty"`
	Transitions []BreakerTransition `json:"transitions,omitempty"`
	// Calls counts the calls answered by earlier runs.
	Calls  int           `json:"calls,omitempty"`
	Config retry.Breaker `json:"config"`
}

// BreakerView is a breaker workflow's state as BreakerQuery answers it.
type BreakerView struct {
	BreakerInput
	// Now is the breaker workflow's time of the answer; WindowCalls and
	// WindowFailures the outcomes in the window then.
	Now            time.Time `json:"now"`
	WindowCalls    int       `json:"window_calls"`
	WindowFailures int       `json:"window_failures"`
}

// breakerBook is the arithmetic of a breaker workflow, on any clock: the
// workflow runs it on its own, the in-memory breaker of the tests on the
// asking instance's.
type breakerBook struct {
	st BreakerInput
}

func newBreakerBook(in BreakerInput) *breakerBook {
	b := &breakerBook{st: in}
	if b.st.Trials == nil {
		b.st.Trials = map[string]time.Time{}
	}
	if b.st.Circuit.State == "" {
		b.st.Circuit.State = retry.CircuitClosed
	}
	return b
}

// call answers one request at now.
func (b *breakerBook) call(req BreakerRequest, now time.Time) BreakerReply {
	if req.Breaker.Name != "" {
		b.st.Config = req.Breaker
	}
	b.st.Calls++
	cfg := &b.st.Config
	for h, until := range b.st.Trials {
		if !now.Before(until) {
			delete(b.st.Trials, h)
		}
	}
	if next, changed := cfg.At(b.st.Circuit, now); changed {
		b.change(next, now)
	}
	reply := BreakerReply{}
	c := b.st.Circuit
	switch req.Op {
	case BreakerAsk:
		// A holder asking again gave its last pass up.
		delete(b.st.Trials, req.Holder)
		ok, wait := cfg.Permit(c, now, len(b.st.Trials))
		if ok {
			reply.OK, reply.Ticket = true, c.Epoch
			if c.State == retry.CircuitHalfOpen {
				b.st.Trials[req.Holder] = now.Add(max(req.Lease, time.Minute))
			}
		} else {
			if wait.IsZero() {
				wait = now.Add(breakerPoll)
				for _, until := range b.st.Trials {
					if until.Before(wait) {
						wait = until
					}
				}
			}
			reply.Wait = wait
		}
	case BreakerCancel:
		if req.Ticket == c.Epoch {
			delete(b.st.Trials, req.Holder)
		}
	case BreakerDone:
		if req.Ticket == c.Epoch {
			delete(b.st.Trials, req.Holder)
		}
		if next := cfg.Record(c, req.Ticket, req.Outcome, now); next.State != c.State || next.Epoch != c.Epoch {
			b.change(next, now)
		} else {
			b.st.Circuit = next
		}
	}
	reply.Circuit = b.circuit()
	reply.Trials = len(b.st.Trials)
	return reply
}

// change moves the circuit to next and notes the transition.
func (b *breakerBook) change(next retry.Circuit, now time.Time) {
	b.st.Circuit = next
	clear(b.st.Trials)
	t := BreakerTransition{Time: now, State: string(next.State), Epoch: next.Epoch}
	if next.State == retry.CircuitOpen {
		b.st.Opened++
		t.Calls, t.Failures = next.OpenedBy.Calls, next.OpenedBy.Failures
		if t.Calls == 0 {
			t.Calls, t.Failures = 1, 1
		}
	}
	if next.State == retry.CircuitHalfOpen {
		t.Time = next.Since
	}
	b.st.Transitions = append(b.st.Transitions, t)
	if n := len(b.st.Transitions); n > keptTransitions {
		b.st.Transitions = slices.Clone(b.st.Transitions[n-keptTransitions:])
	}
}

// circuit is a copy of the circuit that shares nothing with the book.
func (b *breakerBook) circuit() retry.Circuit {
	c := b.st.Circuit
	c.Buckets = slices.Clone(c.Buckets)
	return c
}

// idle says whether the breaker holds nothing worth keeping at now: closed,
// no outcome in its window, no trial in flight.
func (b *breakerBook) idle(now time.Time) bool {
	c, _ := b.st.Config.At(b.st.Circuit, now)
	calls, _ := b.st.Config.Calls(c, now)
	return c.State == retry.CircuitClosed && calls == 0 && len(b.st.Trials) == 0
}

func (b *breakerBook) view(now time.Time) BreakerView {
	v := BreakerView{BreakerInput: b.st, Now: now}
	v.Circuit, _ = b.st.Config.At(b.circuit(), now)
	v.Trials = maps.Clone(b.st.Trials)
	v.WindowCalls, v.WindowFailures = b.st.Config.Calls(v.Circuit, now)
	return v
}

// next is the input of the run that continues this one.
func (b *breakerBook) next(calls int) BreakerInput {
	out := b.st
	out.Circuit = b.circuit()
	out.Circuit.OpenedBy = b.st.Circuit.OpenedBy
	out.Trials = maps.Clone(b.st.Trials)
	out.Calls = calls
	return out
}

// BreakerWorkflow owns one breaker's state and answers calls. It continues
// as new after breakerCallsPerRun calls (or when Temporal suggests it),
// once no call is being answered, carrying its state; closed with an empty
// window, no trial in flight and no call for a whole window (at least a
// minute), it ends, and the next call starts it again, closed.
func BreakerWorkflow(ctx workflow.Context, in BreakerInput) error {
	book := newBreakerBook(in)
	calls := 0
	if err := workflow.SetUpdateHandler(ctx, BreakerUpdate, func(ctx workflow.Context, req BreakerRequest) (BreakerReply, error) {
		calls++
		return book.call(req, workflow.Now(ctx)), nil
	}); err != nil {
		return fmt.Errorf("register %s update: %w", BreakerUpdate, err)
	}
	if err := workflow.SetQueryHandler(ctx, BreakerQuery, func() (BreakerView, error) {
		return book.view(workflow.Now(ctx)), nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", BreakerQuery, err)
	}
	for {
		seen := calls
		idle := max(time.Minute, book.st.Config.Window)
		due, err := workflow.AwaitWithTimeout(ctx, idle, func() bool {
			return calls >= breakerCallsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		})
		if err != nil {
			return err
		}
		if due {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return workflow.NewContinueAsNewError(ctx, BreakerWorkflowType, book.next(in.Calls+calls))
		}
		if calls == seen && book.idle(workflow.Now(ctx)) {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return nil
		}
	}
}

// callBreaker is BreakerActivity: an update-with-start of the breaker's
// workflow, so that the first call creates it.
func callBreaker(c client.Client, seen *circuitSeen) func(ctx context.Context, req BreakerRequest) (BreakerReply, error) {
	return func(ctx context.Context, req BreakerRequest) (BreakerReply, error) {
		name := req.Breaker.Name
		op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       BreakerWorkflowID(name),
			TaskQueue:                BudgetQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            "wf circuit breaker " + name,
		}, BreakerWorkflowType, BreakerInput{Name: name, Config: req.Breaker})
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID:     req.ID,
				UpdateName:   BreakerUpdate,
				Args:         []any{req},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err != nil {
			return BreakerReply{}, fmt.Errorf("%s circuit breaker %s: %w", req.Op, name, err)
		}
		var res BreakerReply
		if err := h.Get(ctx, &res); err != nil {
			return BreakerReply{}, fmt.Errorf("%s circuit breaker %s: %w", req.Op, name, err)
		}
		seen.note(name, res.Circuit.State)
		return res, nil
	}
}

// circuitSeen tells a worker's views (wf_circuit_state) each change of a
// breaker's state in the answers its calls got.
type circuitSeen struct {
	bus  *event.Bus
	mu   sync.Mutex
	last map[string]retry.CircuitState
}

func newCircuitSeen(bus *event.Bus) *circuitSeen {
	return &circuitSeen{bus: bus, last: map[string]retry.CircuitState{}}
}

func (s *circuitSeen) note(name string, st retry.CircuitState) {
	if s == nil || s.bus == nil {
		return
	}
	// Under the lock, so that the views see the changes in order
	// (Publish never blocks).
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last[name] == st {
		return
	}
	s.last[name] = st
	typ := event.CircuitClosed
	switch st {
	case retry.CircuitOpen:
		typ = event.CircuitOpened
	case retry.CircuitHalfOpen:
		typ = event.CircuitHalfOpen
	}
	s.bus.Publish(event.Event{Time: time.Now(), Type: typ, Breaker: name})
}

// breakerGate is the core's BreakerGate in the interpreter: each call is
// one BreakerActivity, which the core waits for (Temporal records the
// activity and replays its answer). An activity Temporal retries until
// the breaker workflow answers, so an unreachable breaker makes attempts
// wait, never fail.
type breakerGate struct {
	ip   *interpreter
	cfgs map[string]retry.Breaker
	seq  int
	// last is each breaker's last answer: what the core keeps seeing when
	// a call is cut short (the run cancelled).
	last map[string]BreakerReply
}

func (g *breakerGate) Ask(name, activity string, now time.Time) core.BreakerAnswer {
	return g.call(BreakerRequest{Op: BreakerAsk, Breaker: g.cfgs[name], Holder: activity, Lease: g.lease(activity)}, now)
}

func (g *breakerGate) Done(name, activity string, ticket int, o retry.Outcome, now time.Time) core.BreakerAnswer {
	return g.call(BreakerRequest{Op: BreakerDone, Breaker: g.cfgs[name], Holder: activity, Ticket: ticket, Outcome: o}, now)
}

func (g *breakerGate) Cancel(name, activity string, ticket int, now time.Time) core.BreakerAnswer {
	return g.call(BreakerRequest{Op: BreakerCancel, Breaker: g.cfgs[name], Holder: activity, Ticket: ticket}, now)
}

// lease is how long a trial pass of activity may stay unreported: its
// attempt's start-to-close timeout, an hour without one.
func (g *breakerGate) lease(activity string) time.Duration {
	if a := g.ip.wf.Activity(activity); a != nil && a.Timeout > 0 {
		return a.Timeout + attemptGrace
	}
	return time.Hour
}

func (g *breakerGate) call(req BreakerRequest, now time.Time) core.BreakerAnswer {
	ctx := g.ip.ctx
	info := workflow.GetInfo(ctx)
	g.seq++
	req.ID = fmt.Sprintf("%s/%s/b%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, g.seq)
	req.Holder = info.WorkflowExecution.ID + "/" + req.Holder
	req.Now = now
	name := req.Breaker.Name
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           g.ip.in.TaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		// Infrastructure, not an attempt: the call is idempotent, so
		// Temporal retries it until the breaker answers.
		RetryPolicy: &sdktemporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 5 * time.Second},
		Summary:     "wf: circuit breaker " + name + " " + req.Op,
	})
	var res BreakerReply
	if err := workflow.ExecuteActivity(actx, BreakerActivity, req).Get(ctx, &res); err != nil {
		// Only a cancelled run gets here: the state last seen, and ask
		// again in a moment.
		res = g.last[name]
		res.OK, res.Wait = false, now.Add(time.Second)
		return answer(res)
	}
	if g.last == nil {
		g.last = map[string]BreakerReply{}
	}
	g.last[name] = res
	return answer(res)
}

func answer(r BreakerReply) core.BreakerAnswer {
	return core.BreakerAnswer{OK: r.OK, Ticket: r.Ticket, Wait: r.Wait, Circuit: r.Circuit, Trials: r.Trials}
}

// Breaker returns the state of a breaker's workflow, queried from its
// running workflow (a worker answers); nil when it does not run (it never
// did, or it ended idle: the breaker is closed with an empty window).
func (c *Client) Breaker(ctx context.Context, name string) (*BreakerView, error) {
	id := BreakerWorkflowID(name)
	d, err := c.SDK.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s on Temporal at %s: %s", id, c.address, shortError(err))
	}
	info := d.GetWorkflowExecutionInfo()
	run := &Run{WorkflowID: id, RunID: info.GetExecution().GetRunId(), Status: info.GetStatus(), TaskQueue: info.GetTaskQueue()}
	if !run.Running() {
		return nil, nil
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := c.SDK.QueryWorkflow(qctx, id, run.RunID, BreakerQuery)
	if err != nil {
		return nil, c.queryError(run, err)
	}
	var view BreakerView
	if err := v.Get(&view); err != nil {
		return nil, fmt.Errorf("decode the state of %s: %w", id, err)
	}
	return &view, nil
}

// Record is the breaker's state as the local engine keeps it.
func (v *BreakerView) Record() *record.Breaker {
	c := v.Circuit
	r := &record.Breaker{Name: v.Name, State: string(c.State), Since: c.Since, HalfOpenAt: c.HalfOpenAt, TrialSuccesses: c.TrialSuccesses, Epoch: c.Epoch}
	for _, b := range c.Buckets {
		r.Window = append(r.Window, record.BreakerBucket{Start: b.Start, Successes: b.Successes, Failures: b.Failures})
	}
	return r
}
