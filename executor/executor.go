// Package executor is the thin shell around the deterministic core: it
// loads state, feeds the core one input at a time, commits what the core
// asks to persist (one synced group commit per step), and only then starts
// attempts and publishes events. It arms a single wall-clock timer for the
// core's next wake-up.
package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Store is the part of the state store the executor needs; *statefile.Store
// implements it.
type Store interface {
	Activities(workflow, key string) (map[string]*record.Activity, error)
	Budgets() (map[string]*record.Budget, error)
	// Commit applies the mutations in one transaction and returns once they
	// are synced to disk.
	Commit([]record.Mutation) error
}

// instanceReader is optionally implemented by a Store (statefile does) so
// that an instance keeps its creation time across applies.
type instanceReader interface {
	Instance(workflow, key string) (*record.Instance, error)
}

// attemptReader is optionally implemented by a Store (statefile does) so
// that an attempt found running after a crash keeps its real start time.
type attemptReader interface {
	Attempts(workflow, key, activity string) ([]*record.Attempt, error)
}

// AttemptRunner runs one attempt; *activity.Runner implements it.
type AttemptRunner interface {
	Run(ctx context.Context, req activity.Request) activity.Result
}

// Options configures a run.
type Options struct {
	Config    *config.Config
	Instances []core.Instance
	Store     Store
	Runner    AttemptRunner
	// Bus receives every event; it never blocks the executor. Optional.
	Bus *event.Bus
	// Clock is the wall clock when nil.
	Clock Clock
	// Parallelism caps running exec/http attempts; 10 when zero.
	Parallelism int
	// Grace is how long Stop lets running attempts finish before cancelling
	// them; 10s when zero.
	Grace time.Duration
	// Seed seeds the jitter draws; when zero, the state's identity does
	// (Store.ID, when the store has one), as on the Temporal engine, so the
	// same state draws the same delays on both engines (core.JitterRand).
	Seed uint64
}

// Outcome is how a run ended.
type Outcome struct {
	// Status is "succeeded", "failed" or "interrupted".
	Status  string
	Summary event.Summary
}

// Run is a started run. Its methods are safe for concurrent use.
type Run struct {
	opts    Options
	clock   Clock
	core    *core.Core
	results chan core.Result
	cmds    chan command
	done    chan struct{}

	attemptCtx     context.Context
	cancelAttempts context.CancelFunc
	inflight       int // owned by the loop goroutine
	wg             sync.WaitGroup
	// work hands an attempt to an idle worker; workers exit once
	// workersQuit is closed (stopWorkers).
	work        chan core.Attempt
	workersQuit chan struct{}
	stopOnce    sync.Once

	outcome Outcome
	err     error
}

type commandKind int

const (
	cmdStop commandKind = iota
	cmdCancel
	cmdFireNow
)

type command struct {
	kind               commandKind
	instance, activity string
}

// Start loads the state of the planned instances, runs the core's first
// step (plan events, crash recovery, first attempts) and returns once that
// step is committed. The run then proceeds in its own goroutine until Wait
// returns. Cancelling ctx acts like Cancel.
func Start(ctx context.Context, opts Options) (*Run, error) {
	if opts.Store == nil || opts.Runner == nil {
		return nil, errors.New("start run: Store and Runner are required")
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 10
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	seed := strconv.FormatUint(opts.Seed, 10)
	if id, ok := opts.Store.(interface{ ID() string }); ok && opts.Seed == 0 {
		seed = id.ID()
	} else if opts.Seed == 0 {
		seed = strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	copts := core.Options{
		Instances:     opts.Instances,
		Budgets:       map[string]retry.Budget{},
		Parallelism:   opts.Parallelism,
		Seed:          seed,
		Activities:    map[string]map[string]*record.Activity{},
		InstanceState: map[string]*record.Instance{},
		Running:       map[string]map[string]*record.Attempt{},
	}
	if opts.Config != nil {
		for name, b := range opts.Config.Budgets {
			rb := b.Budget
			if rb.Name == "" {
				rb.Name = name
			}
			copts.Budgets[name] = rb
		}
	}
	ir, _ := opts.Store.(instanceReader)
	for _, in := range opts.Instances {
		if in.Workflow == nil {
			return nil, errors.New("start run: instance without a workflow")
		}
		wf := in.Workflow
		acts, err := opts.Store.Activities(wf.Name, wf.Key)
		if err != nil {
			return nil, fmt.Errorf("load state of %s: %w", wf.Address(), err)
		}
		copts.Activities[wf.Address()] = acts
		if err := loadRunning(opts.Store, wf, acts, copts.Running); err != nil {
			return nil, err
		}
		if ir != nil {
			rec, err := ir.Instance(wf.Name, wf.Key)
			if err != nil {
				return nil, fmt.Errorf("load instance %s: %w", wf.Address(), err)
			}
			if rec != nil {
				copts.InstanceState[wf.Address()] = rec
			}
		}
	}
	budgets, err := opts.Store.Budgets()
	if err != nil {
		return nil, fmt.Errorf("load retry budgets: %w", err)
	}
	copts.BudgetState = budgets

	actx, cancel := context.WithCancel(context.Background())
	r := &Run{
		opts:           opts,
		clock:          opts.Clock,
		core:           core.New(copts),
		results:        make(chan core.Result, opts.Parallelism),
		cmds:           make(chan command, 16),
		done:           make(chan struct{}),
		attemptCtx:     actx,
		cancelAttempts: cancel,
		work:           make(chan core.Attempt),
		workersQuit:    make(chan struct{}),
	}
	ready := r.core.Start(r.clock.Now())
	if err := r.commit(ready.Persist); err != nil {
		cancel()
		return nil, err
	}
	go r.loop(ctx, ready)
	return r, nil
}

// loadRunning reads the attempt records of activities whose state says an
// attempt was running (the engine stopped mid-attempt), in name order.
func loadRunning(st Store, wf *config.Workflow, acts map[string]*record.Activity, into map[string]map[string]*record.Attempt) error {
	ar, ok := st.(attemptReader)
	if !ok {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(acts)) {
		a := acts[name]
		if a.Status != record.StatusRunning {
			continue
		}
		atts, err := ar.Attempts(wf.Name, wf.Key, name)
		if err != nil {
			return fmt.Errorf("load attempts of %s activity.%s: %w", wf.Address(), name, err)
		}
		for _, att := range atts {
			if att.Generation == a.Generation && att.Number == a.Attempts {
				if into[wf.Address()] == nil {
					into[wf.Address()] = map[string]*record.Attempt{}
				}
				into[wf.Address()][name] = att
			}
		}
	}
	return nil
}

// Stop stops starting new attempts; running ones get the grace period to
// finish, then they are cancelled (and recorded as interrupted).
func (r *Run) Stop() { r.send(command{kind: cmdStop}) }

// Cancel stops the run and cancels running attempts now.
func (r *Run) Cancel() { r.send(command{kind: cmdCancel}) }

// FireNow fires the pending retry of one activity now. instance is the
// address "workflow/key"; activity is "NAME" or "activity.NAME".
func (r *Run) FireNow(instance, activity string) {
	r.send(command{kind: cmdFireNow, instance: instance, activity: activity})
}

func (r *Run) send(c command) {
	select {
	case r.cmds <- c:
	case <-r.done:
	}
}

// Wait blocks until the run is over. The error is set when state could not
// be committed; the outcome is then "failed".
func (r *Run) Wait() (Outcome, error) {
	<-r.done
	return r.outcome, r.err
}

// Done is closed when the run is over.
func (r *Run) Done() <-chan struct{} { return r.done }

func (r *Run) commit(ms []record.Mutation) error {
	if len(ms) == 0 {
		return nil
	}
	if err := r.opts.Store.Commit(ms); err != nil {
		return fmt.Errorf("commit run state: %w", err)
	}
	return nil
}

// loop owns the core. The core's steps are committed by a separate
// committer goroutine (see committer) so that the core keeps seeing timers
// and results on time while a commit is in flight; a step's attempts and
// events are acted on only once its commit has returned, in step order.
func (r *Run) loop(ctx context.Context, first core.Ready) {
	defer close(r.done)
	defer r.stopWorkers()
	defer r.cancelAttempts()

	cm := newCommitter(r.commit)
	go cm.run()
	defer cm.close()

	var (
		timer  Timer
		timerC <-chan time.Time
		graceC <-chan time.Time
		grace  Timer
		ctxC   = ctx.Done()
		armed  time.Time
		wake   = first.Wake
		batch  []core.Result
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if grace != nil {
			grace.Stop()
		}
	}()
	// act carries out a committed step; it reports whether the run is over.
	act := func(ready core.Ready) bool {
		if r.opts.Bus != nil {
			r.opts.Bus.Publish(ready.Events...)
		}
		for _, a := range ready.Start {
			r.launch(a)
		}
		if ready.Done {
			r.outcome.Status = ready.Status
			for _, ev := range ready.Events {
				if ev.Type == event.RunCompleted && ev.Summary != nil {
					r.outcome.Summary = *ev.Summary
				}
			}
			return true
		}
		return false
	}
	step := func(next core.Ready) {
		wake = next.Wake
		cm.submit(next)
	}
	stop := func(cancelNow bool) {
		if cancelNow {
			r.cancelAttempts()
		} else if grace == nil {
			grace = r.clock.NewTimer(r.opts.Grace)
			graceC = grace.C()
		}
		step(r.core.Stop(r.clock.Now()))
	}

	if act(first) {
		return
	}
	for {
		// One wall-clock timer for the core's earliest durable timer.
		if !wake.Equal(armed) {
			armed = wake
			switch {
			case armed.IsZero():
				if timer != nil {
					timer.Stop()
				}
				timerC = nil
			case timer == nil:
				timer = r.clock.NewTimer(max(armed.Sub(r.clock.Now()), 0))
				timerC = timer.C()
			default:
				timer.Reset(max(armed.Sub(r.clock.Now()), 0))
				timerC = timer.C()
			}
		}

		select {
		case done := <-cm.done:
			if done.err != nil {
				r.abort(done.err)
				return
			}
			for _, ready := range done.steps {
				if act(ready) {
					return
				}
			}
		case res := <-r.results:
			r.inflight--
			batch = append(batch[:0], res)
			// Everything that finished meanwhile shares this step.
			for drained := false; !drained; {
				select {
				case res := <-r.results:
					r.inflight--
					batch = append(batch, res)
				default:
					drained = true
				}
			}
			step(r.core.AttemptsDone(r.clock.Now(), batch))
		case <-timerC:
			armed = time.Time{}
			timerC = nil
			step(r.core.Tick(r.clock.Now()))
		case <-graceC:
			graceC = nil
			r.cancelAttempts()
		case c := <-r.cmds:
			switch c.kind {
			case cmdStop:
				stop(false)
			case cmdCancel:
				stop(true)
			case cmdFireNow:
				step(r.core.FireNow(r.clock.Now(), c.instance, c.activity))
			}
		case <-ctxC:
			ctxC = nil
			stop(true)
		}
	}
}

// committer commits the core's steps in order, merging every step queued
// while the previous commit was in flight into one Commit (one fsync).
type committer struct {
	commit func([]record.Mutation) error
	mu     sync.Mutex
	queue  []core.Ready
	notify chan struct{}
	quit   chan struct{}
	exited chan struct{}
	done   chan commitDone
}

type commitDone struct {
	steps []core.Ready
	err   error
}

func newCommitter(commit func([]record.Mutation) error) *committer {
	return &committer{
		commit: commit,
		notify: make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
		done:   make(chan commitDone),
	}
}

func (c *committer) submit(r core.Ready) {
	c.mu.Lock()
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *committer) run() {
	defer close(c.exited)
	for {
		select {
		case <-c.notify:
		case <-c.quit:
			return
		}
		for {
			c.mu.Lock()
			steps := c.queue
			c.queue = nil
			c.mu.Unlock()
			if len(steps) == 0 {
				break
			}
			var ms []record.Mutation
			for _, s := range steps {
				ms = append(ms, s.Persist...)
			}
			err := c.commit(ms)
			select {
			case c.done <- commitDone{steps: steps, err: err}:
			case <-c.quit:
				return
			}
			if err != nil {
				return
			}
		}
	}
}

// close stops the committer and waits for it, so that no commit is in
// flight once the run is over.
func (c *committer) close() {
	close(c.quit)
	<-c.exited
}

// abort ends a run whose state can no longer be written: nothing more may
// start, running attempts are cancelled and awaited so no goroutine
// outlives the run.
func (r *Run) abort(err error) {
	r.err = err
	r.outcome.Status = event.StatusFailed
	r.cancelAttempts()
	for r.inflight > 0 {
		<-r.results
		r.inflight--
	}
	r.stopWorkers()
	r.wg.Wait()
}

// launch runs a on an idle worker, or on a new one when none is idle, so
// the loop never waits. Workers outlive their attempt because a goroutine
// running an exec attempt grows its stack several times (os/exec and the
// fork path are deep): with a fresh goroutine per attempt that copying was
// about a tenth of the CPU of a run of short exec activities. There are at
// most about twice Parallelism workers: one is started only when none is
// waiting for work.
func (r *Run) launch(a core.Attempt) {
	r.inflight++
	select {
	case r.work <- a:
	default:
		r.wg.Add(1)
		go r.worker(a)
	}
}

func (r *Run) worker(a core.Attempt) {
	defer r.wg.Done()
	for {
		r.results <- r.runAttempt(a)
		select {
		case a = <-r.work:
		case <-r.workersQuit:
			return
		}
	}
}

// stopWorkers lets idle workers exit; a worker busy with an attempt exits
// after delivering its result.
func (r *Run) stopWorkers() { r.stopOnce.Do(func() { close(r.workersQuit) }) }

func (r *Run) runAttempt(a core.Attempt) core.Result {
	res := r.opts.Runner.Run(r.attemptCtx, activity.Request{
		Workflow:       a.Workflow,
		Instance:       a.Instance,
		Activity:       a.Activity,
		Attempt:        a.Number,
		IdempotencyKey: a.IdempotencyKey,
		Spec:           a.Spec,
		Timeout:        a.Timeout,
	})
	out := core.Result{
		Workflow: a.Workflow,
		Instance: a.Instance,
		Activity: a.Activity,
		Number:   a.Number,
		Start:    res.Start,
		End:      res.End,
		Outputs:  res.Outputs,
	}
	if res.Failure != nil {
		f := retry.Failure(*res.Failure)
		out.Failure = &f
	}
	return out
}
