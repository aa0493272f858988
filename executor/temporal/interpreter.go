package temporal

import (
	"errors"
	"fmt"
	"time"

	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// carriedEvents is how many of the last events a run continued as new
// hands to the next, so that followers polling across the switch miss
// nothing.
const carriedEvents = 512

// FireNow is the payload of SignalFireNow.
type FireNow struct {
	// Activity is "NAME" or "activity.NAME".
	Activity string `json:"activity"`
}

// Interpret is the interpreter workflow: it runs one instance's activities
// through wf's deterministic core. Everything it does is a function of its
// input and of what Temporal recorded (activity results, timer firings,
// signals, workflow.Now), so a replay on any worker takes the same steps.
func Interpret(ctx workflow.Context, in Input) (*State, error) {
	cfg, wf, err := in.load()
	if err != nil {
		return nil, sdktemporal.NewNonRetryableApplicationError(err.Error(), "wf.bad_input", errBadInput)
	}
	ip := newInterpreter(ctx, in, cfg, wf)
	if err := ip.register(); err != nil {
		return nil, err
	}
	return ip.run()
}

type interpreter struct {
	ctx  workflow.Context
	in   Input
	wf   *config.Workflow
	core *core.Core
	recs *records
	log  *eventLog

	results workflow.Channel
	fireNow workflow.ReceiveChannel

	// One Temporal timer for the core's earliest wake-up.
	timer       workflow.Future
	cancelTimer workflow.CancelFunc
	armed       time.Time

	first    bool // the next step is the core's Start
	draining bool // stopping to continue as new
	done     bool
	status   string
	summary  *event.Summary

	// Totals across the runs of one apply.
	begin    time.Time
	attempts int
	retries  int
}

func newInterpreter(ctx workflow.Context, in Input, cfg *config.Config, wf *config.Workflow) *interpreter {
	maxKept := DefaultKeptAttempts
	ip := &interpreter{
		ctx:      ctx,
		in:       in,
		wf:       wf,
		recs:     newRecords(in.Carry, maxKept),
		log:      newEventLog(in.Carry, orDefault(in.EventLog, DefaultEventLog)),
		results:  workflow.NewBufferedChannel(ctx, orDefault(in.Parallelism, 10)),
		fireNow:  workflow.GetSignalChannel(ctx, SignalFireNow),
		first:    true,
		begin:    workflow.Now(ctx),
		attempts: in.Carry.Attempts0,
		retries:  in.Carry.Retries0,
	}
	if in.Carry.Continued && !in.Carry.Begin.IsZero() {
		ip.begin = in.Carry.Begin
	}
	budgets := map[string]retry.Budget{}
	for name, b := range cfg.Budgets {
		rb := b.Budget
		if rb.Name == "" {
			rb.Name = name
		}
		budgets[name] = rb
	}
	addr := wf.Address()
	opts := core.Options{
		Instances:   []core.Instance{{Workflow: wf, Modes: ip.modes()}},
		Budgets:     budgets,
		Parallelism: orDefault(in.Parallelism, 10),
		Seed:        in.StateID,
		StateID:     in.StateID,
		Activities:  map[string]map[string]*record.Activity{addr: ip.recs.activities},
		BudgetState: ip.recs.budgets,
	}
	if len(cfg.Breakers) > 0 {
		opts.Breakers = map[string]retry.Breaker{}
		for name, b := range cfg.Breakers {
			opts.Breakers[name] = b.Breaker
		}
		opts.BreakerState = ip.recs.breakers
	}
	if in.SharedBudgets && len(budgets) > 0 {
		opts.BudgetGate = &budgetGate{ip: ip, budgets: budgets}
	}
	if in.Carry.Instance != nil {
		opts.InstanceState = map[string]*record.Instance{addr: in.Carry.Instance}
	}
	ip.core = core.New(opts)
	return ip
}

// modes are the planned modes; a continued run resumes everything the
// plan did not leave alone (an activity skipped because its upstream
// failed stays as it is).
func (ip *interpreter) modes() map[string]core.Mode {
	if !ip.in.Carry.Continued {
		return ip.in.Modes
	}
	out := map[string]core.Mode{}
	for _, a := range ip.wf.Activities {
		rec := ip.recs.activities[a.Name]
		switch m, ok := ip.in.Modes[a.Name]; {
		case ok && m == core.ModeSkip, rec != nil && rec.Status == record.StatusSkipped:
			out[a.Name] = core.ModeSkip
		default:
			out[a.Name] = core.ModeResume
		}
	}
	return out
}

func (ip *interpreter) register() error {
	if err := workflow.SetQueryHandler(ip.ctx, QueryEvents, func(after int64, limit int) (EventsPage, error) {
		if limit <= 0 || limit > maxPage {
			limit = maxPage
		}
		return ip.log.page(after, limit, ip.done), nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryEvents, err)
	}
	if err := workflow.SetQueryHandler(ip.ctx, QueryState, func() (*State, error) {
		return ip.state(), nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryState, err)
	}
	return nil
}

func (ip *interpreter) state() *State {
	s := ip.recs.state()
	s.StateID = ip.in.StateID
	s.Done, s.Status, s.Summary = ip.done, ip.status, ip.summary
	s.NextSeq = ip.log.next
	s.Plan = ip.log.plan
	s.Runs = ip.in.Carry.Runs + 1
	return s
}

func (ip *interpreter) run() (*State, error) {
	ctx := ip.ctx
	ip.handle(ip.core.Start(workflow.Now(ctx)))
	for !ip.done {
		if !ip.draining && ip.shouldContinueAsNew() {
			ip.draining = true
			ip.handle(ip.core.Stop(workflow.Now(ctx)))
			if ip.done {
				break
			}
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ip.results, func(c workflow.ReceiveChannel, _ bool) {
			var r core.Result
			c.Receive(ctx, &r)
			batch := []core.Result{r}
			// Everything that finished meanwhile shares this step.
			for c.ReceiveAsync(&r) {
				batch = append(batch, r)
			}
			ip.handle(ip.core.AttemptsDone(workflow.Now(ctx), batch))
		})
		if ip.timer != nil {
			sel.AddFuture(ip.timer, func(workflow.Future) {
				// The timer fired, so its time has come, whatever the
				// rounding of workflow.Now.
				now := workflow.Now(ctx)
				if now.Before(ip.armed) {
					now = ip.armed
				}
				ip.timer, ip.armed = nil, time.Time{}
				ip.handle(ip.core.Tick(now))
			})
		}
		sel.AddReceive(ip.fireNow, func(c workflow.ReceiveChannel, _ bool) {
			var f FireNow
			c.Receive(ctx, &f)
			ip.handle(ip.core.FireNow(workflow.Now(ctx), ip.wf.Address(), f.Activity))
		})
		sel.Select(ctx)
	}
	if ip.draining && ip.status == event.StatusInterrupted {
		return nil, workflow.NewContinueAsNewError(ctx, WorkflowType, ip.nextInput())
	}
	return ip.final(), nil
}

// shouldContinueAsNew says when to hand over to a fresh run: when Temporal
// suggests it (its history nears its limits) or at the input's own limit.
func (ip *interpreter) shouldContinueAsNew() bool {
	info := workflow.GetInfo(ip.ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	return ip.in.HistoryLimit > 0 && info.GetCurrentHistoryLength() >= ip.in.HistoryLimit
}

// handle carries out one step of the core, in the order the local shell
// does: records first, then events, attempts and the timer.
func (ip *interpreter) handle(r core.Ready) {
	ip.recs.apply(r.Persist)
	evs := r.Events
	first := ip.first
	ip.first = false
	kept := evs[:0:0]
	for _, ev := range evs {
		switch {
		case first && ip.in.Carry.Continued && (ev.Type == event.Plan || ev.Type == event.TimerRecovered):
			// The apply goes on: followers already have these.
			continue
		case ev.Type == event.RunCompleted && ip.draining && r.Status == event.StatusInterrupted:
			// Not the end: the next run carries on.
			continue
		case ev.Type == event.AttemptStarted:
			ip.attempts++
			if ev.Attempt > 1 {
				ip.retries++
			}
		case ev.Type == event.RunCompleted && ev.Summary != nil:
			sum := ip.totalSummary(*ev.Summary)
			ev.Summary = &sum
		}
		kept = append(kept, ev)
	}
	ip.log.add(kept)
	for _, a := range r.Start {
		ip.launch(a)
	}
	ip.arm(r.Wake)
	if r.Done {
		ip.done, ip.status = true, r.Status
		for _, ev := range kept {
			if ev.Type == event.RunCompleted && ev.Summary != nil {
				s := *ev.Summary
				ip.summary = &s
			}
		}
	}
}

// totalSummary is the run's summary across continue-as-new: the core only
// knows its own run.
func (ip *interpreter) totalSummary(s event.Summary) event.Summary {
	if !ip.in.Carry.Continued {
		return s
	}
	s.Attempts, s.Retries = ip.attempts, ip.retries
	s.DurationMs = workflow.Now(ip.ctx).Sub(ip.begin).Milliseconds()
	s.Succeeded, s.Failed, s.Skipped, s.Unchanged, s.Pending = 0, 0, 0, 0, 0
	for _, a := range ip.wf.Activities {
		rec := ip.recs.activities[a.Name]
		switch {
		case ip.in.Modes[a.Name] == core.ModeSkip && hasMode(ip.in.Modes, a.Name):
			s.Unchanged++
		case rec == nil:
			s.Pending++
		case rec.Status == record.StatusSucceeded:
			s.Succeeded++
		case rec.Status == record.StatusFailed:
			s.Failed++
		case rec.Status == record.StatusSkipped:
			s.Skipped++
		default:
			s.Pending++
		}
	}
	return s
}

func hasMode(m map[string]core.Mode, name string) bool { _, ok := m[name]; return ok }

// arm keeps one Temporal timer for the core's earliest wake-up. A later
// wake-up leaves an armed earlier timer alone (its firing is a harmless
// tick), so a timer is cancelled only when an earlier one is needed.
func (ip *interpreter) arm(wake time.Time) {
	if wake.IsZero() || ip.draining {
		return
	}
	if ip.timer != nil && !wake.Before(ip.armed) {
		return
	}
	if ip.cancelTimer != nil && ip.timer != nil {
		ip.cancelTimer()
	}
	d := wake.Sub(workflow.Now(ip.ctx))
	if d < time.Millisecond {
		// Due now: a zero timer fires at once without touching history.
		d = 0
	}
	tctx, cancel := workflow.WithCancel(ip.ctx)
	ip.timer = workflow.NewTimerWithOptions(tctx, d, workflow.TimerOptions{Summary: "wf: next wake-up"})
	ip.cancelTimer = cancel
	ip.armed = wake
}

// launch starts one attempt as a Temporal activity with no Temporal
// retries: wf decides every retry.
func (ip *interpreter) launch(a core.Attempt) {
	ctx := ip.ctx
	gen := 0
	if rec := ip.recs.activities[a.Activity]; rec != nil {
		gen = rec.Generation
	}
	queue := ip.in.TaskQueue
	if cfg := ip.wf.Activity(a.Activity); cfg != nil && cfg.TaskQueue != "" {
		queue = cfg.TaskQueue
	}
	startToClose := noTimeout
	if a.Timeout > 0 {
		startToClose = a.Timeout + attemptGrace
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           queue,
		ActivityID:          fmt.Sprintf("%s/%d/%d", a.Activity, gen, a.Number),
		StartToCloseTimeout: startToClose,
		HeartbeatTimeout:    orDefault(ip.in.HeartbeatTimeout, DefaultHeartbeatTimeout),
		RetryPolicy:         &sdktemporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             fmt.Sprintf("activity.%s attempt %d", a.Activity, a.Number),
	})
	scheduled := workflow.Now(ctx)
	fut := workflow.ExecuteActivity(actx, AttemptActivity, AttemptInput{
		Workflow:         a.Workflow,
		Instance:         a.Instance,
		Activity:         a.Activity,
		Generation:       gen,
		Number:           a.Number,
		IdempotencyKey:   a.IdempotencyKey,
		Spec:             a.Spec,
		Timeout:          a.Timeout,
		HeartbeatTimeout: a.HeartbeatTimeout,
		HeartbeatDetails: a.HeartbeatDetails,
	})
	workflow.Go(ctx, func(gctx workflow.Context) {
		var res AttemptResult
		err := fut.Get(gctx, &res)
		r := core.Result{
			Workflow: a.Workflow,
			Instance: a.Instance,
			Activity: a.Activity,
			Number:   a.Number,
			Start:    scheduled,
		}
		if err != nil {
			res = attemptFailure(err)
		}
		r.End = clampEnd(res.End, scheduled, workflow.Now(gctx))
		r.Outputs = res.Outputs
		r.Interrupted = res.Interrupted
		r.HeartbeatDetails = res.HeartbeatDetails
		if res.Failure != nil {
			f := retry.Failure(*res.Failure)
			r.Failure = &f
		}
		ip.results.Send(gctx, r)
	})
}

// attemptFailure turns the error of an attempt's activity into the
// attempt's result. A failure the worker reported carries its result; a
// worker that died or was cut off (heartbeat or start-to-close timeout,
// cancellation) is the engine's failure, never the activity's: it is
// recorded as interrupted.
func attemptFailure(err error) AttemptResult {
	var appErr *sdktemporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		var res AttemptResult
		if appErr.Details(&res) == nil && res.Failure != nil {
			return res
		}
	}
	var timeoutErr *sdktemporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		res := interrupted(fmt.Sprintf("the worker running the attempt was lost (%s timeout)", timeoutName(timeoutErr)))
		// The attempt's heartbeat details, as its worker last sent them.
		var details string
		if timeoutErr.HasLastHeartbeatDetails() && timeoutErr.LastHeartbeatDetails(&details) == nil {
			res.HeartbeatDetails = details
		}
		return res
	}
	var canceled *sdktemporal.CanceledError
	if errors.As(err, &canceled) {
		return interrupted("the attempt was cancelled on its worker")
	}
	// Anything else is wf's or Temporal's fault, not the activity's; it is
	// retried under the policy, like a panic in the local runner.
	return AttemptResult{Failure: &activity.Failure{Type: activity.TypeInternal, Message: "Temporal: " + err.Error()}}
}

func interrupted(msg string) AttemptResult {
	return AttemptResult{Failure: &activity.Failure{Type: activity.TypeInterrupted, Message: msg}, Interrupted: true}
}

func timeoutName(e *sdktemporal.TimeoutError) string {
	switch e.TimeoutType().String() {
	case "Heartbeat":
		return "heartbeat"
	case "StartToClose":
		return "start-to-close"
	case "ScheduleToClose":
		return "schedule-to-close"
	}
	return e.TimeoutType().String()
}

// final is the run's result: its records and last events.
func (ip *interpreter) final() *State {
	s := ip.state()
	s.Events = ip.log.tail(carriedEvents)
	return s
}

// nextInput is the input of the run that continues this one.
func (ip *interpreter) nextInput() Input {
	next := ip.in
	s := ip.recs.state()
	next.Carry = s.Carry()
	next.Carry.Continued = true
	next.Carry.NextSeq = ip.log.next
	next.Carry.Plan = ip.log.plan
	next.Carry.Events = ip.log.tail(carriedEvents)
	next.Carry.Begin = ip.begin
	next.Carry.Attempts0 = ip.attempts
	next.Carry.Retries0 = ip.retries
	next.Carry.Runs = ip.in.Carry.Runs + 1
	return next
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
