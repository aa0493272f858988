package temporal

import (
	"context"
	"sync/atomic"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
)

// Runner runs one attempt; *activity.Runner, the local engine's runner,
// is the one wf worker uses.
type Runner interface {
	Run(ctx context.Context, req activity.Request) activity.Result
}

// Attempts is the worker side of AttemptActivity: it runs each attempt
// with the local engine's runner (environment, idempotency key, output and
// error files, output caps), in the worker's checkout, and heartbeats while
// the attempt runs so that a dead worker is noticed within the heartbeat
// timeout.
type Attempts struct {
	Runner Runner
	// Dir is the worker's checkout of the configuration: exec working
	// directories are resolved against it.
	Dir string
	// Identity names the worker in attempt results.
	Identity string
}

// Run is AttemptActivity.
func (a *Attempts) Run(ctx context.Context, in AttemptInput) (AttemptResult, error) {
	info := sdkactivity.GetInfo(ctx)
	spec := in.Spec
	if spec != nil && spec.Exec != nil {
		cp := *spec.Exec
		cp.Dir = WorkerDir(cp.Dir, a.Dir)
		spec = &config.Resolved{Exec: &cp}
	}
	// The attempt's own heartbeat details ride on the worker's
	// heartbeats, so that a worker that is lost mid-attempt still hands
	// them to the next attempt (they come back in the timeout error).
	var details atomic.Pointer[string]
	runCtx := activity.WithHeartbeatHook(ctx, func(d string) {
		if d != "" {
			details.Store(&d)
		}
	})
	stop := heartbeat(ctx, info.HeartbeatTimeout, &details)
	res := a.Runner.Run(runCtx, activity.Request{
		Workflow:         in.Workflow,
		Instance:         in.Instance,
		Activity:         in.Activity,
		Attempt:          in.Number,
		IdempotencyKey:   in.IdempotencyKey,
		Spec:             spec,
		Timeout:          in.Timeout,
		HeartbeatTimeout: in.HeartbeatTimeout,
		HeartbeatDetails: in.HeartbeatDetails,
	})
	stop()
	out := AttemptResult{Start: res.Start, End: res.End, Outputs: res.Outputs, Failure: res.Failure, Worker: a.Identity, HeartbeatDetails: res.HeartbeatDetails}
	// A runner that reports interrupted after this attempt's context was
	// cancelled (the worker shutting down, the server cancelling a lost
	// attempt) was cut short by the engine, not by the activity.
	out.Interrupted = res.Failure != nil && res.Failure.Type == activity.TypeInterrupted && ctx.Err() != nil
	if res.Failure == nil {
		return out, nil
	}
	// Failed: a non-retryable application error, so Temporal shows the
	// attempt failed and never retries it itself; the details carry the
	// result for the interpreter.
	return AttemptResult{}, sdktemporal.NewNonRetryableApplicationError(
		res.Failure.Type+": "+res.Failure.Message, res.Failure.Type, nil, out)
}

// heartbeat records a heartbeat every third of timeout until stop is
// called, with the attempt's latest heartbeat details when it has some.
// The SDK batches heartbeats and cancels ctx once the server says the
// attempt is gone, which kills an exec attempt's process group.
func heartbeat(ctx context.Context, timeout time.Duration, details *atomic.Pointer[string]) (stop func()) {
	if timeout <= 0 {
		return func() {}
	}
	record := func() {
		if d := details.Load(); d != nil {
			sdkactivity.RecordHeartbeat(ctx, *d)
			return
		}
		sdkactivity.RecordHeartbeat(ctx)
	}
	every := max(timeout/3, 100*time.Millisecond)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		record()
		for {
			select {
			case <-t.C:
				record()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// WorkerOptions configures NewWorker.
type WorkerOptions struct {
	// TaskQueue is the queue the worker polls; DefaultTaskQueue when empty.
	TaskQueue string
	// Parallelism caps the attempts the worker runs at once; 10 when zero.
	Parallelism int
	// Identity names the worker in Temporal's history; the SDK's default
	// (pid@host) when empty.
	Identity string
}

// BudgetQueue is the task queue of the budget workflows. Every wf worker
// polls it besides its own queue, so that a budget keeps answering
// whichever workers come and go.
const BudgetQueue = "wf-budgets"

// Worker is a running wf worker: the pollers of its task queue and of
// BudgetQueue.
type Worker struct {
	main, budgets worker.Worker
}

// Start starts polling.
func (w *Worker) Start() error {
	if err := w.main.Start(); err != nil {
		return err
	}
	if err := w.budgets.Start(); err != nil {
		w.main.Stop()
		return err
	}
	return nil
}

// Stop stops polling and waits for the running attempts (they are
// cancelled after the worker's stop timeout).
func (w *Worker) Stop() {
	w.budgets.Stop()
	w.main.Stop()
}

// NewWorker returns a worker that runs the interpreter workflow and the
// attempts of the instances on its task queue, and the budget workflows.
// Start it with Start.
func NewWorker(c client.Client, attempts *Attempts, opts WorkerOptions) *Worker {
	queue := orDefault(opts.TaskQueue, DefaultTaskQueue)
	w := worker.New(c, queue, worker.Options{
		MaxConcurrentActivityExecutionSize: orDefault(opts.Parallelism, 10),
		Identity:                           opts.Identity,
		// Attempts get the heartbeat timeout to notice a cancellation.
		WorkerStopTimeout: 10 * time.Second,
		// A workflow task offered to the worker that has the instance
		// cached waits this long before any worker may take it: short,
		// so that a dead worker delays a due retry by at most a second.
		StickyScheduleToStartTimeout: time.Second,
	})
	w.RegisterWorkflowWithOptions(Interpret, workflow.RegisterOptions{Name: WorkflowType})
	w.RegisterActivityWithOptions(attempts.Run, sdkactivity.RegisterOptions{Name: AttemptActivity})
	w.RegisterActivityWithOptions(takeBudget(c), sdkactivity.RegisterOptions{Name: BudgetTakeActivity})
	b := worker.New(c, BudgetQueue, worker.Options{
		Identity:                     opts.Identity,
		StickyScheduleToStartTimeout: time.Second,
	})
	b.RegisterWorkflowWithOptions(BudgetWorkflow, workflow.RegisterOptions{Name: BudgetWorkflowType})
	return &Worker{main: w, budgets: b}
}

// WorkflowRegistry is the part of a worker, a replayer or a test
// environment that registering the interpreter needs.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// RegisterWorkflow registers the interpreter and budget workflows.
func RegisterWorkflow(r WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(Interpret, workflow.RegisterOptions{Name: WorkflowType})
	r.RegisterWorkflowWithOptions(BudgetWorkflow, workflow.RegisterOptions{Name: BudgetWorkflowType})
}
