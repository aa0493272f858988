package temporal

import (
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// The callers of the breaker workflows: the worker's activity that sends
// the updates, the interpreter's gate that runs it, and the client's query.

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
	run, err := c.describe(ctx, id)
	if err != nil || run == nil || !run.Running() {
		return nil, err
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
