package executor

import (
	"cmp"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/retry"
)

// launch runs a on an idle worker, or on a new one when none is idle, so
// the loop never waits. Workers outlive their attempt because a goroutine
// running an exec attempt grows its stack several times (the fork path is
// deep): with a fresh goroutine per attempt that copying was
// about a tenth of the CPU of a run of short exec activities. There are at
// most about twice Parallelism workers: one is started only when none is
// waiting for work.
func (r *Run) launch(a core.Attempt) {
	if r.releaseProcs == nil && a.Spec != nil && a.Spec.Exec != nil {
		r.releaseProcs = reserveForkProcs(r.opts.Parallelism)
	}
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
// after delivering its result. The loop calls it as the run ends (its
// attempts are over), and the Ps reserved for forks go back.
func (r *Run) stopWorkers() {
	r.stopOnce.Do(func() {
		close(r.workersQuit)
		if r.releaseProcs != nil {
			r.releaseProcs()
		}
	})
}

// forkProcs counts the runs that reserved Ps for forks (reserveForkProcs),
// process-wide, since GOMAXPROCS is.
var forkProcs struct {
	mu    sync.Mutex
	runs  int
	base  int // GOMAXPROCS before the first reservation
	set   int // what the reservation set
	fixed bool
}

// reserveForkProcs adds Ps (GOMAXPROCS) while a run starts exec attempts,
// and returns the function that gives them back.
//
// syscall.ForkExec (os/exec's too) forks with clone(CLONE_VFORK) through a
// raw system call: the forking goroutine keeps its P until the child has
// called execve (golang/go#11155), and the child must first get a CPU.
// On 2 shared CPUs under load that took 1.5 ms at the median (perf trace of
// BenchmarkExecTrue1000: the clone3 calls summed to the run's wall time,
// one of the two Ps held on average), and meanwhile the loop, the
// committer returning from fdatasync and the workers just handed an
// attempt waited for the other P: workers launched after a commit waited
// 28 ms on average to run at parallelism 50 (the trace's scheduler
// latency). A P held in a fork uses no CPU, so one more P per CPU lets the
// engine run while forks are in flight; parallelism bounds how many can be.
// GOMAXPROCS set in the environment is the user's choice and kept.
func reserveForkProcs(parallelism int) (release func()) {
	forkProcs.mu.Lock()
	defer forkProcs.mu.Unlock()
	if forkProcs.runs == 0 {
		forkProcs.fixed = os.Getenv("GOMAXPROCS") != ""
		if !forkProcs.fixed {
			forkProcs.base = runtime.GOMAXPROCS(0)
			forkProcs.set = forkProcs.base + min(forkProcs.base, max(parallelism, 1))
			runtime.GOMAXPROCS(forkProcs.set)
		}
	}
	forkProcs.runs++
	var once sync.Once
	return func() {
		once.Do(func() {
			forkProcs.mu.Lock()
			defer forkProcs.mu.Unlock()
			forkProcs.runs--
			// Unless someone else changed it meanwhile. (Setting it
			// ends the runtime's own updates of GOMAXPROCS to a
			// changed CPU limit for the rest of the process: an apply
			// is one process per run, so that is acceptable.)
			if forkProcs.runs == 0 && !forkProcs.fixed && runtime.GOMAXPROCS(0) == forkProcs.set {
				runtime.GOMAXPROCS(forkProcs.base)
			}
		})
	}
}

func (r *Run) runAttempt(a core.Attempt) attemptDone {
	ctx := r.attemptCtx
	if r.spawns != nil && a.Spec != nil && a.Spec.Exec != nil {
		ctx = activity.WithSpawnHook(ctx, func(p activity.Spawned) { r.queueSpawn(a, p) })
	}
	if a.HeartbeatTimeout > 0 {
		ctx = activity.WithHeartbeatHook(ctx, func(details string) { r.beat(a, details) })
	}
	res := r.opts.Runner.Run(ctx, activity.Request{
		Workflow:         a.Workflow,
		Instance:         a.Instance,
		Activity:         a.Activity,
		Attempt:          a.Number,
		IdempotencyKey:   a.IdempotencyKey,
		Spec:             a.Spec,
		Timeout:          a.Timeout,
		HeartbeatTimeout: a.HeartbeatTimeout,
		HeartbeatDetails: a.HeartbeatDetails,
	})
	out := core.Result{
		Workflow:         a.Workflow,
		Instance:         a.Instance,
		Activity:         a.Activity,
		Number:           a.Number,
		Start:            res.Start,
		End:              res.End,
		Outputs:          res.Outputs,
		HeartbeatDetails: res.HeartbeatDetails,
		Printed:          core.Printed(res.Printed),
	}
	if res.Failure != nil {
		f := retry.Failure(*res.Failure)
		out.Failure = &f
		// Only the engine's own cancellation makes an attempt interrupted;
		// an activity that reports the type itself failed on its own.
		out.Interrupted = f.Type == activity.TypeInterrupted && r.attemptCtx.Err() != nil
	}
	return attemptDone{res: out}
}

// beat hands a heartbeat of a running attempt to the loop: only the latest
// of each attempt is kept, so a watcher never waits.
func (r *Run) beat(a core.Attempt, details string) {
	k := beatKey{a.Workflow, a.Instance, a.Activity, a.Number}
	r.beatMu.Lock()
	h := r.beats[k]
	h.Workflow, h.Instance, h.Activity, h.Number = a.Workflow, a.Instance, a.Activity, a.Number
	if details != "" || h.Details == "" {
		h.Details = details
	}
	r.beats[k] = h
	r.beatMu.Unlock()
	select {
	case r.beatC <- struct{}{}:
	default:
	}
}

// takeBeats returns the heartbeats waiting for the loop, in a stable order.
func (r *Run) takeBeats() []core.Heartbeat {
	r.beatMu.Lock()
	defer r.beatMu.Unlock()
	out := make([]core.Heartbeat, 0, len(r.beats))
	for _, h := range r.beats {
		out = append(out, h)
	}
	clear(r.beats)
	slices.SortFunc(out, func(x, y core.Heartbeat) int {
		return cmp.Or(strings.Compare(x.Workflow, y.Workflow), strings.Compare(x.Instance, y.Instance),
			strings.Compare(x.Activity, y.Activity), x.Number-y.Number)
	})
	return out
}
