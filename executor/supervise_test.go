package executor

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/activity"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/proc"
	"github.com/wf-engine/wf/statefile/record"
)

const singleHCL = `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["x"] }
  }
  activity "after" {
    exec { command = ["y"] }
    depends_on = [activity.a]
  }
}
`

// funcRunner runs every attempt with f.
type funcRunner func(ctx context.Context, req activity.Request) activity.Result

func (f funcRunner) Run(ctx context.Context, req activity.Request) activity.Result {
	return f(ctx, req)
}

// startOrphan starts a real process that looks like attempt n of an
// activity under key: in its own process group, with the attempt's
// environment, as a previous wf would have left it. argv is run by sh.
func startOrphan(t *testing.T, key string, n int, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "WF_IDEMPOTENCY_KEY=" + key, "WF_ATTEMPT=" + strconv.Itoa(n)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd
}

// alive reports whether pid is a live (not zombie) process that started at
// ticks.
func alive(pid int, ticks uint64) bool {
	st, err := (&proc.Table{}).Stat(pid)
	return err == nil && !st.Exited() && st.StartTicks == ticks
}

// crashedStore is a state in which attempt n of activity a (generation 1,
// no retry block) was running when wf died, with its spawn recorded as
// pid.
func crashedStore(t *testing.T, key string, n, pid int, ticks uint64) *memStore {
	t.Helper()
	boot, err := (&proc.Table{}).BootID()
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore()
	st.acts["w/k"] = map[string]*record.Activity{"a": {
		Workflow: "w", Instance: "k", Name: "a", Generation: 1, IdempotencyKey: key,
		Status: record.StatusRunning, Attempts: n, FirstStart: t0.Add(-time.Minute), Interrupted: n - 1,
	}}
	st.attempts[attemptKey("w/k", "a", n)] = &record.Attempt{
		Workflow: "w", Instance: "k", Activity: "a", Generation: 1, Number: n, IdempotencyKey: key,
		Start: t0.Add(-time.Minute), Outcome: record.OutcomeRunning,
	}
	if pid > 0 {
		st.spawns["w/k"] = map[string]*record.Spawn{"a": {
			Workflow: "w", Instance: "k", Activity: "a", Generation: 1, Number: n,
			PID: pid, StartTicks: ticks, BootID: boot, Recorded: t0.Add(-time.Minute),
		}}
	}
	return st
}

// TestOrphanEndedBeforeNextAttempt: the process group of an attempt left
// running, and a grandchild that left it, are dead before the next
// attempt starts; the next attempt is attempt n+1 under the same key.
func TestOrphanEndedBeforeNextAttempt(t *testing.T) {
	const key = "wf2-orphan-test-key"
	leader := startOrphan(t, key, 3, "setsid sh -c 'trap \"\" HUP; sleep 60' & sleep 60")
	pid := leader.Process.Pid
	tbl := &proc.Table{}
	ticks, err := tbl.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the grandchild in its own session (out of the group).
	var grand int
	var grandTicks uint64
	waitFor(t, "the grandchild", func() bool {
		pids, _ := tbl.PIDs()
		for _, p := range pids {
			st, err := tbl.Stat(p)
			if err != nil || p == pid || st.PGRP == pid || st.Exited() {
				continue
			}
			if env := tbl.Environ(p); env["WF_IDEMPOTENCY_KEY="+key] && strings.Contains(cmdline(p), "sleep") {
				grand, grandTicks = p, st.StartTicks
				return true
			}
		}
		return false
	})

	store := crashedStore(t, key, 3, pid, ticks)
	cfg := loadConfig(t, singleHCL)
	var mu sync.Mutex
	var seen []string
	runner := funcRunner(func(ctx context.Context, req activity.Request) activity.Result {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req.Activity+" "+strconv.Itoa(req.Attempt)+" "+req.IdempotencyKey)
		if req.Activity == "a" && (alive(pid, ticks) || alive(grand, grandTicks)) {
			t.Errorf("attempt %d started while the previous one's processes live", req.Attempt)
		}
		return activity.Result{Start: time.Now(), End: time.Now(), Outputs: []byte(`{}`)}
	})
	bus := event.NewBus()
	log := watch(t, bus)
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Bus: bus})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait()
	if err != nil || out.Status != event.StatusSucceeded {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	ev := log.wait(t, event.OrphanEnded, "activity.a", 3)
	if ev.ProcessGroup != pid || !slices.Contains(ev.PIDs, pid) || !slices.Contains(ev.PIDs, grand) {
		t.Errorf("orphan_ended = %+v; want group %d with %d and the grandchild %d", ev, pid, pid, grand)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "a 4 "+key || !strings.HasPrefix(seen[1], "after 1 ") {
		t.Fatalf("attempts = %q; want a 4 under %s, then after", seen, key)
	}
	if a := store.attempt("w/k", "a", 3); a.Outcome != record.OutcomeInterrupted {
		t.Fatalf("attempt 3 = %+v", a)
	}
}

func cmdline(pid int) string {
	b, _ := exec.Command("cat", "/proc/"+strconv.Itoa(pid)+"/cmdline").Output()
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// TestReusedPIDNotTouched: a spawn record whose PID now names another
// process (another start time) leaves that process alone.
func TestReusedPIDNotTouched(t *testing.T) {
	other := startOrphan(t, "wf2-someone-else", 1, "sleep 60")
	pid := other.Process.Pid
	ticks, err := (&proc.Table{}).StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	store := crashedStore(t, "wf2-reused", 1, pid, ticks+1)
	cfg := loadConfig(t, singleHCL)
	runner := funcRunner(func(ctx context.Context, req activity.Request) activity.Result {
		return activity.Result{Start: time.Now(), End: time.Now(), Outputs: []byte(`{}`)}
	})
	bus := event.NewBus()
	log := watch(t, bus)
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Bus: bus})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Wait(); err != nil || out.Status != event.StatusSucceeded {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	if !alive(pid, ticks) {
		t.Fatal("a process that merely reused the recorded PID was killed")
	}
	if _, ok := log.find(event.OrphanEnded, "", 0); ok {
		t.Fatal("orphan_ended reported with nothing of the attempt alive")
	}
}

// TestOrphanSurvivorHoldsActivity: processes that outlive SIGKILL (faked
// here: the signal is never sent) hold the activity and its downstream;
// nothing about them is recorded, the run fails, the next run tries again.
func TestOrphanSurvivorHoldsActivity(t *testing.T) {
	const key = "wf2-survivor"
	orphan := startOrphan(t, key, 2, "exec sleep 60")
	pid := orphan.Process.Pid
	ticks, err := (&proc.Table{}).StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	store := crashedStore(t, key, 2, pid, ticks)
	cfg := loadConfig(t, singleHCL)
	tbl := &proc.Table{
		Signal:      func(int, uint64, syscall.Signal) error { return nil },
		SignalGroup: func(int, syscall.Signal) error { return nil },
	}
	var calls []string
	runner := funcRunner(func(ctx context.Context, req activity.Request) activity.Result {
		calls = append(calls, req.Activity)
		return activity.Result{Start: time.Now(), End: time.Now(), Outputs: []byte(`{}`)}
	})
	bus := event.NewBus()
	log := watch(t, bus)
	began := time.Now()
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner, Bus: bus, Processes: tbl, OrphanWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("Start returned after %v, before the orphan wait", waited)
	}
	out, err := run.Wait()
	if err != nil || out.Status != event.StatusFailed || out.Summary.Pending != 2 {
		t.Fatalf("outcome %+v, %v; want failed with a and after pending", out, err)
	}
	if len(calls) != 0 {
		t.Fatalf("attempts started: %v", calls)
	}
	ev := log.wait(t, event.OrphanAlive, "activity.a", 2)
	if !slices.Equal(ev.PIDs, []int{pid}) || ev.Error == nil || !strings.Contains(ev.Error.Message, "PID "+strconv.Itoa(pid)) {
		t.Fatalf("orphan_alive = %+v", ev)
	}
	if a := store.activity("w/k", "a"); a.Status != record.StatusRunning || a.Attempts != 2 {
		t.Fatalf("held activity record changed: %+v", a)
	}
}

// TestSpawnRecordedBeforeWait: a real exec attempt records its process
// group, with the start time and boot that identify it, while it runs.
func TestSpawnRecordedBeforeWait(t *testing.T) {
	cfg := loadConfig(t, `
workflow "w" {
  key = "k"
  activity "a" {
    exec { script = "sleep 1" }
  }
}`)
	store := newMemStore()
	runner := activity.NewRunner(activity.Options{BaseEnv: []string{"PATH=/usr/bin:/bin"}})
	defer runner.Close()
	tbl := &proc.Table{}
	type seen struct {
		sp     *record.Spawn
		ticks  uint64
		pgrp   int
		exited bool
	}
	got := make(chan seen, 1)
	spy := funcRunner(func(ctx context.Context, req activity.Request) activity.Result {
		done := make(chan activity.Result, 1)
		go func() { done <- runner.Run(ctx, req) }()
		for {
			select {
			case res := <-done:
				got <- seen{}
				return res
			case <-time.After(5 * time.Millisecond):
			}
			sps, _ := store.Spawns("w", "k")
			if sp := sps["a"]; sp != nil {
				st, err := tbl.Stat(sp.PID)
				got <- seen{sp: sp, ticks: st.StartTicks, pgrp: st.PGRP, exited: err != nil || st.Exited()}
				return <-done
			}
		}
	})
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: spy})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Wait(); err != nil || out.Status != event.StatusSucceeded {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	s := <-got
	boot, _ := tbl.BootID()
	if s.sp == nil {
		t.Fatal("no spawn was recorded while the attempt ran")
	}
	if s.exited || s.sp.StartTicks != s.ticks || s.pgrp != s.sp.PID || s.sp.BootID != boot || s.sp.Generation != 1 || s.sp.Number != 1 {
		t.Fatalf("spawn = %+v; the process then: start %d, group %d, exited %v; boot %s", s.sp, s.ticks, s.pgrp, s.exited, boot)
	}
}

// TestSpawnRecordFailureStopsRun: a spawn that cannot be recorded is a
// failed commit: the run stops (the attempt itself is let finish), the
// error is returned.
func TestSpawnRecordFailureStopsRun(t *testing.T) {
	cfg := loadConfig(t, `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["true"] }
  }
  activity "b" {
    exec { command = ["true"] }
    depends_on = [activity.a]
  }
}`)
	store := newMemStore()
	store.failSpawns = true
	runner := activity.NewRunner(activity.Options{BaseEnv: []string{"PATH=/usr/bin:/bin"}})
	defer runner.Close()
	run, err := Start(context.Background(), Options{Config: cfg, Instances: instances(cfg, nil), Store: store, Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait()
	if !errors.Is(err, errDiskFull) || out.Status != event.StatusFailed {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	if b := store.activity("w/k", "b"); b != nil && b.Attempts > 0 {
		t.Fatalf("b started after the failure: %+v", b)
	}
}
