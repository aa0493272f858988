package executor

import (
	"fmt"
	"strconv"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/proc"
	"github.com/wf-engine/wf/statefile/record"
)

// No attempt outlives the engine unsupervised (SPEC §4.1). Every exec
// attempt starts with Pdeathsig SIGKILL in its own process group, and its
// group is queued for the state (queueSpawn) as soon as it has started,
// before wf waits for it, and written with the next commit. If wf dies
// anyway, the next run finds the attempt recorded running and, before the
// core records anything (endOrphans):
//
//   - kills the recorded process group if its leader is still the recorded
//     process (same boot id, same start time in /proc/PID/stat), so that a
//     process that merely reused the PID is never touched;
//   - kills every process whose environment carries the attempt's
//     WF_IDEMPOTENCY_KEY and WF_ATTEMPT (grandchildren that left the group,
//     or processes started before the spawn was recorded);
//   - waits until all of them have exited (a zombie has), at most
//     Options.OrphanWait.
//
// Only then does the core record the attempt interrupted and start the
// next one. Processes that survive SIGKILL hold the activity: its next
// attempt is not started in this run, with an orphan_alive event naming
// them.

// queueSpawn records the process group of an exec attempt that has just
// started. It runs on the attempt's worker before the process is waited
// for, and takes the process's start time there (from the clock read
// around the fork, or /proc): once the process is reaped its PID may name
// another one. The record is written by the committer (submitSpawn)
// rather than here: a write of its own queued
// behind the fdatasync of the commit in flight, and the worker waited
// 1.5-2.6 ms for it (median of BenchmarkExecTrue1000), longer than `true`
// lives. It reaches the log as soon as it did then: with the next commit,
// or at once when none is in flight.
func (r *Run) queueSpawn(a core.Attempt, p activity.Spawned) {
	// A start time that cannot be read (no /proc) still leaves the
	// environment scan; the group is then never killed by PID alone.
	ticks, _ := r.procs.SpawnTicks(p.PID, p.BootBefore, p.BootAfter)
	pid := p.PID
	r.cm.submitSpawn(&record.Spawn{
		Workflow:   a.Workflow,
		Instance:   a.Instance,
		Activity:   a.Activity,
		Generation: a.Generation,
		Number:     a.Number,
		PID:        pid,
		StartTicks: ticks,
		BootID:     r.bootID,
		Recorded:   r.clock.Now(),
	})
}

// recordSpawns writes spawn records that no commit carries (the
// committer's record function).
func (r *Run) recordSpawns(sps []*record.Spawn) error {
	if err := r.spawns.RecordSpawns(sps); err != nil {
		sp := sps[0]
		more := ""
		if len(sps) > 1 {
			more = fmt.Sprintf(" and of %d more", len(sps)-1)
		}
		return fmt.Errorf("record the process of attempt %d of activity.%s%s: %w", sp.Number, sp.Activity, more, err)
	}
	return nil
}

// endOrphans ends the processes of every attempt that the state says is
// running in the planned instances, whether the activity resumes, starts
// over, changed kind or is no longer configured (an http attempt has no
// process: the scan simply finds none), and reports by instance address
// and activity name what it did. running holds, by instance address, the
// names of the records that say so, in name order (runningNames).
func endOrphans(opts Options, ss spawnStore, acts map[string]map[string]*record.Activity, running map[string][]string) (map[string]map[string]core.Orphan, error) {
	type ref struct {
		addr, name string
		number     int
	}
	var (
		refs    []ref
		targets []proc.Attempt
	)
	for _, in := range opts.Instances {
		wf := in.Workflow
		addr := wf.Address()
		var spawns map[string]*record.Spawn
		running := running[addr]
		for _, name := range running {
			rec := acts[addr][name]
			if spawns == nil && ss != nil {
				got, err := ss.Spawns(wf.Name, wf.Key)
				if err != nil {
					return nil, fmt.Errorf("load the process records of %s: %w", addr, err)
				}
				spawns = got
			}
			n := max(rec.Attempts, 1)
			var t proc.Attempt
			if rec.IdempotencyKey != "" {
				t.Env = []string{"WF_IDEMPOTENCY_KEY=" + rec.IdempotencyKey, "WF_ATTEMPT=" + strconv.Itoa(n)}
			}
			if sp := spawns[name]; sp != nil && sp.Generation == rec.Generation && sp.Number == n {
				t.Group, t.GroupStart, t.GroupBoot = sp.PID, sp.StartTicks, sp.BootID
			}
			refs = append(refs, ref{addr: addr, name: name, number: n})
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	ended, err := opts.Processes.End(targets, opts.OrphanWait)
	out := map[string]map[string]core.Orphan{}
	for i, rf := range refs {
		o := core.Orphan{Number: rf.number}
		if err != nil {
			o.Err = fmt.Sprintf("attempt %d, left running by a previous wf, could not be looked for (%v); its next attempt is not started so that two attempts never run at once", rf.number, err)
		} else {
			o.ProcessGroup, o.Killed, o.Survivors = ended[i].Group, ended[i].Killed, ended[i].Survivors
		}
		if out[rf.addr] == nil {
			out[rf.addr] = map[string]core.Orphan{}
		}
		out[rf.addr][rf.name] = o
	}
	return out, nil
}
