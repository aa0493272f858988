package temporal

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/retry"
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
