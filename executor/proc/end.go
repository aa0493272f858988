package proc

import (
	"slices"
	"syscall"
	"time"
)

// Attempt names the processes of one attempt that a previous wf left
// running.
type Attempt struct {
	// Group is the process group recorded when the attempt started (the
	// PID of its leader); 0 when none was recorded. It is killed only if
	// the leader is still the recorded process: same boot, same start
	// time.
	Group      int
	GroupStart uint64
	GroupBoot  string
	// Env are NAME=VALUE pairs that every process of the attempt carries
	// (its WF_IDEMPOTENCY_KEY and WF_ATTEMPT): they find the processes
	// that left the group, or were started before the group was recorded.
	// Empty: no process is looked for by its environment.
	Env []string
}

// Ended is what End did about one Attempt.
type Ended struct {
	// Group is the recorded process group, when its leader still was the
	// attempt's and the group was killed; 0 otherwise.
	Group int
	// Killed lists the processes that were alive and were sent SIGKILL.
	Killed []int
	// Survivors lists the processes still alive when the wait ran out.
	Survivors []int
}

// pollInterval is how often End looks again while it waits.
const pollInterval = 20 * time.Millisecond

type procKey struct {
	pid   int
	ticks uint64
}

// End kills every process of the attempts with SIGKILL, and waits until
// all of them have exited (a zombie has) or wait has passed; what is still
// alive then is reported as Survivors. Processes forked meanwhile carry the
// same environment and are found and killed too. A process that merely
// reused a recorded PID is never touched.
func (t *Table) End(atts []Attempt, wait time.Duration) ([]Ended, error) {
	out := make([]Ended, len(atts))
	if len(atts) == 0 {
		return out, nil
	}
	boot, bootErr := t.BootID()
	owner := map[procKey]int{}
	signalled := map[procKey]bool{}
	self := t.self()
	deadline := time.Now().Add(wait)

	for first := true; ; first = false {
		if first {
			for i, a := range atts {
				if a.Group <= 0 || bootErr != nil || a.GroupBoot != boot {
					continue
				}
				st, err := t.Stat(a.Group)
				if err != nil || st.StartTicks != a.GroupStart || st.PGRP != a.Group {
					continue // gone, or the PID now names another process
				}
				// The leader (alive or a zombie) pins the group ID, so
				// every member of the group now is the attempt's.
				members, err := t.members(a.Group, i, owner, self)
				if err != nil {
					return nil, err
				}
				if err := t.signalGroup(a.Group, syscall.SIGKILL); err == nil {
					out[i].Group = a.Group
					for _, k := range members {
						signalled[k] = true
						out[i].Killed = append(out[i].Killed, k.pid)
					}
				}
			}
		}
		alive, err := t.scan(atts, owner, self)
		if err != nil {
			return nil, err
		}
		if len(alive) == 0 {
			break
		}
		if !first && time.Now().After(deadline) {
			for k, i := range alive {
				out[i].Survivors = append(out[i].Survivors, k.pid)
			}
			break
		}
		for k, i := range alive {
			if !signalled[k] {
				signalled[k] = true
				out[i].Killed = append(out[i].Killed, k.pid)
			}
			// Sent again on every round: cheap, and it covers a process
			// that was stopped or between exec and its first instruction.
			_ = t.signal(k.pid, k.ticks, syscall.SIGKILL)
		}
		time.Sleep(pollInterval)
	}
	for i := range out {
		slices.Sort(out[i].Killed)
		slices.Sort(out[i].Survivors)
	}
	return out, nil
}

// members adds the live processes of group pgid to owner as attempt i's
// and returns them.
func (t *Table) members(pgid, i int, owner map[procKey]int, self int) ([]procKey, error) {
	pids, err := t.PIDs()
	if err != nil {
		return nil, err
	}
	var out []procKey
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := t.Stat(pid)
		if err != nil || st.Exited() || st.PGRP != pgid {
			continue
		}
		k := procKey{pid, st.StartTicks}
		owner[k] = i
		out = append(out, k)
	}
	return out, nil
}

// scan returns the live processes of the attempts: those already known
// (same PID and start time) and those carrying an attempt's environment.
func (t *Table) scan(atts []Attempt, owner map[procKey]int, self int) (map[procKey]int, error) {
	pids, err := t.PIDs()
	if err != nil {
		return nil, err
	}
	wantEnv := false
	for _, a := range atts {
		wantEnv = wantEnv || len(a.Env) > 0
	}
	alive := map[procKey]int{}
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := t.Stat(pid)
		if err != nil || st.Exited() {
			continue
		}
		k := procKey{pid, st.StartTicks}
		if i, ok := owner[k]; ok {
			alive[k] = i
			continue
		}
		if !wantEnv {
			continue
		}
		env := t.Environ(pid)
		if len(env) == 0 {
			continue
		}
		for i, a := range atts {
			if hasAll(env, a.Env) {
				owner[k] = i
				alive[k] = i
				break
			}
		}
	}
	return alive, nil
}

// hasAll reports whether env holds every one of pairs (and pairs is not
// empty).
func hasAll(env map[string]bool, pairs []string) bool {
	if len(pairs) == 0 {
		return false
	}
	for _, p := range pairs {
		if !env[p] {
			return false
		}
	}
	return true
}
