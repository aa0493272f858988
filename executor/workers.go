package executor

import (
	"cmp"
	"slices"
	"strings"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/retry"
)

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

func (r *Run) runAttempt(a core.Attempt) attemptDone {
	ctx := r.attemptCtx
	var spawnErr error
	if r.spawns != nil && a.Spec != nil && a.Spec.Exec != nil {
		ctx = activity.WithSpawnHook(ctx, func(pid int) { spawnErr = r.recordSpawn(a, pid) })
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
	return attemptDone{res: out, err: spawnErr}
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
