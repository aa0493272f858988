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
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/proc"
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

// identified is optionally implemented by a Store (statefile does): the
// state's random identity, from which idempotency keys are derived.
type identified interface {
	ID() string
}

// breakerReader is optionally implemented by a Store (statefile does): the
// durable state of the circuit breakers.
type breakerReader interface {
	Breakers() (map[string]*record.Breaker, error)
}

// spawnStore is optionally implemented by a Store (statefile does): the
// process group of every exec attempt is recorded as soon as it has
// started, so that a later run can end an attempt a crashed engine left
// running (see supervise.go).
type spawnStore interface {
	// RecordSpawns writes the records in one write, without a sync (the
	// committer hands it those no commit carries).
	RecordSpawns([]*record.Spawn) error
	Spawns(workflow, key string) (map[string]*record.Spawn, error)
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
	// Processes is the process table used to record spawns and to end
	// the processes of attempts a previous run left running; the real
	// /proc when nil.
	Processes *proc.Table
	// OrphanWait bounds how long Start waits for such processes to exit
	// after SIGKILL; 30s when zero.
	OrphanWait time.Duration
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
	results chan attemptDone
	cmds    chan command
	done    chan struct{}
	// spawns records exec spawns; nil when the Store cannot.
	spawns spawnStore
	// cm commits the core's steps and writes the spawn records (see
	// committer); its goroutine runs from the loop's start to its end.
	cm     *committer
	procs  *proc.Table
	bootID string

	attemptCtx     context.Context
	cancelAttempts context.CancelFunc
	inflight       int // owned by the loop goroutine
	wg             sync.WaitGroup
	// work hands an attempt to an idle worker; workers exit once
	// workersQuit is closed (stopWorkers).
	work        chan core.Attempt
	workersQuit chan struct{}
	stopOnce    sync.Once
	// releaseProcs gives back the Ps reserved for forks (workers.go);
	// set by the loop when it launches the first exec attempt.
	releaseProcs func()

	// beats holds the latest heartbeat of each running attempt until the
	// loop takes them (beatC says there are some); the watchers never
	// wait for the loop.
	beatMu sync.Mutex
	beats  map[beatKey]core.Heartbeat
	beatC  chan struct{}

	outcome Outcome
	err     error
}

type beatKey struct {
	workflow, instance, activity string
	number                       int
}

// attemptDone is a finished attempt as a worker hands it to the loop.
// (A spawn that could not be recorded is reported by the committer, as a
// failed commit.)
type attemptDone struct {
	res core.Result
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
	if opts.Processes == nil {
		opts.Processes = &proc.Table{}
	}
	if opts.OrphanWait <= 0 {
		opts.OrphanWait = 30 * time.Second
	}
	seed := strconv.FormatUint(opts.Seed, 10)
	if id, ok := opts.Store.(interface{ ID() string }); ok && opts.Seed == 0 {
		seed = id.ID()
	} else if opts.Seed == 0 {
		seed = strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	copts := core.Options{
		Instances:   opts.Instances,
		Budgets:     map[string]retry.Budget{},
		Parallelism: opts.Parallelism,
		Seed:        seed,
		Activities:  map[string]map[string]*record.Activity{},
		// The loaded records are read here only before core.New.
		OwnActivities: true,
		InstanceState: map[string]*record.Instance{},
		Running:       map[string]map[string]*record.Attempt{},
	}
	if id, ok := opts.Store.(identified); ok {
		copts.StateID = id.ID()
	}
	if opts.Config != nil {
		for name, b := range opts.Config.Budgets {
			rb := b.Budget
			if rb.Name == "" {
				rb.Name = name
			}
			copts.Budgets[name] = rb
		}
		if len(opts.Config.Breakers) > 0 {
			copts.Breakers = map[string]retry.Breaker{}
			for name, b := range opts.Config.Breakers {
				copts.Breakers[name] = b.Breaker
			}
			if br, ok := opts.Store.(breakerReader); ok {
				states, err := br.Breakers()
				if err != nil {
					return nil, fmt.Errorf("load circuit breakers: %w", err)
				}
				copts.BreakerState = states
			}
		}
	}
	loaded, err := loadActivities(opts.Store, opts.Instances)
	if err != nil {
		return nil, err
	}
	ir, _ := opts.Store.(instanceReader)
	running := map[string][]string{} // by instance address, in name order
	for _, in := range opts.Instances {
		wf := in.Workflow
		acts, ok := loaded[wf.Name][wf.Key]
		if !ok {
			if acts, err = opts.Store.Activities(wf.Name, wf.Key); err != nil {
				return nil, fmt.Errorf("load state of %s: %w", wf.Address(), err)
			}
		}
		copts.Activities[wf.Address()] = acts
		// One pass over the records finds the running ones for both
		// loadRunning and endOrphans: with 100,000 records each pass is
		// 100,000 map entries and records visited, tens of ms at start-up.
		names := runningNames(acts)
		if len(names) > 0 {
			running[wf.Address()] = names
		}
		if err := loadRunning(opts.Store, wf, acts, names, copts.Running); err != nil {
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
	ss, _ := opts.Store.(spawnStore)
	// Before the core records anything: an attempt that a previous run
	// left running must be over before its next attempt can start.
	if copts.Orphans, err = endOrphans(opts, ss, copts.Activities, running); err != nil {
		return nil, err
	}

	actx, cancel := context.WithCancel(context.Background())
	r := &Run{
		opts:           opts,
		clock:          opts.Clock,
		core:           core.New(copts),
		results:        make(chan attemptDone, opts.Parallelism),
		spawns:         ss,
		procs:          opts.Processes,
		cmds:           make(chan command, 16),
		done:           make(chan struct{}),
		attemptCtx:     actx,
		cancelAttempts: cancel,
		work:           make(chan core.Attempt),
		workersQuit:    make(chan struct{}),
		beats:          map[beatKey]core.Heartbeat{},
		beatC:          make(chan struct{}, 1),
	}
	r.cm = newCommitter(r.commit, r.recordSpawns)
	if ss != nil {
		// Without a boot id a spawn cannot be told from a reused PID
		// later; it is recorded anyway for its environment scan.
		r.bootID, _ = r.procs.BootID()
	}
	ready := r.core.Start(r.clock.Now())
	if err := r.commit(ready.Persist); err != nil {
		cancel()
		return nil, err
	}
	go r.loop(ctx, ready)
	return r, nil
}

// runningNames returns, in name order, the names of the records that say
// an attempt was running (the engine stopped mid-attempt). Only those are
// sorted: a large state is mostly not running.
func runningNames(acts map[string]*record.Activity) []string {
	var running []string
	for name, a := range acts {
		if a != nil && a.Status == record.StatusRunning {
			running = append(running, name)
		}
	}
	slices.Sort(running)
	return running
}

// loadRunning reads the attempt records of the activities whose state
// says an attempt was running (running: their names, from runningNames).
func loadRunning(st Store, wf *config.Workflow, acts map[string]*record.Activity, running []string, into map[string]map[string]*record.Attempt) error {
	ar, ok := st.(attemptReader)
	if !ok {
		return nil
	}
	for _, name := range running {
		a := acts[name]
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
// be committed (the run then stopped as on Stop: no new attempt, running
// ones had the grace period); the outcome is then "failed".
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
//
// A commit that fails (a full disk) stops the run as a first Ctrl-C would:
// nothing new starts, running attempts get the grace period, and the run
// ends with the error once they are over. The attempts of a step that
// could not be committed are never started: the core hears that they were
// interrupted, so the state the next apply finds says to resume them.
func (r *Run) loop(ctx context.Context, first core.Ready) {
	defer close(r.done)
	defer r.stopWorkers()
	defer r.cancelAttempts()

	cm := r.cm
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
		// failed is the first commit or spawn-record error (the
		// committer reports both).
		failed error
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if grace != nil {
			grace.Stop()
		}
	}()
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
	fail := func(err error) {
		if failed == nil {
			failed = err
			r.err = err
			stop(false)
		}
	}
	// refuse tells the core that attempts it asked for were not started.
	refuse := func(starts []core.Attempt) {
		if len(starts) == 0 {
			return
		}
		now := r.clock.Now()
		rs := make([]core.Result, len(starts))
		for i, a := range starts {
			rs[i] = core.Result{
				Workflow: a.Workflow, Instance: a.Instance, Activity: a.Activity, Number: a.Number,
				Start: now, End: now, Interrupted: true,
				Failure: &retry.Failure{Type: core.TypeInterrupted, Message: "not started: the state could not be saved"},
			}
		}
		step(r.core.AttemptsDone(now, rs))
	}
	// act carries out a step; it reports whether the run is over.
	act := func(ready core.Ready, committed bool) bool {
		if committed && r.opts.Bus != nil {
			r.opts.Bus.Publish(ready.Events...)
		}
		if committed && failed == nil {
			for _, a := range ready.Start {
				r.launch(a)
			}
		} else {
			refuse(ready.Start)
		}
		if ready.Done {
			r.outcome.Status = ready.Status
			if failed != nil {
				r.outcome.Status = event.StatusFailed
			}
			for _, ev := range ready.Events {
				if ev.Type == event.RunCompleted && ev.Summary != nil {
					r.outcome.Summary = *ev.Summary
				}
			}
			return true
		}
		return false
	}
	// receive feeds finished attempts to the core, all that are there.
	receive := func(d attemptDone) {
		batch = batch[:0]
		for more := true; more; {
			r.inflight--
			batch = append(batch, d.res)
			select {
			case d = <-r.results:
			default:
				more = false
			}
		}
		step(r.core.AttemptsDone(r.clock.Now(), batch))
	}

	if act(first, true) {
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
		case <-cm.done:
			for _, done := range cm.take() {
				if done.err != nil {
					fail(done.err)
				}
				for _, ready := range done.steps {
					if act(ready, done.err == nil) {
						return
					}
				}
			}
		case d := <-r.results:
			receive(d)
		case <-r.beatC:
			if hs := r.takeBeats(); len(hs) > 0 {
				step(r.core.Heartbeats(r.clock.Now(), hs))
			}
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
