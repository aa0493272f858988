package proc

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0 0"
	tests := []struct {
		name, in string
		want     Stat
		err      bool
	}{
		{"plain", "4711 (sleep) S 1 4711" + tail, Stat{PID: 4711, State: 'S', PPID: 1, PGRP: 4711, StartTicks: 987654}, false},
		{"comm with spaces and parens", "42 (a) (b c) Z 7 40" + tail, Stat{PID: 42, State: 'Z', PPID: 7, PGRP: 40, StartTicks: 987654}, false},
		{"no comm", "42 S 1 1", Stat{}, true},
		{"short", "42 (x) S 1 1 0", Stat{}, true},
		{"bad pid", "x (x) S 1 1" + tail, Stat{}, true},
		{"bad state", "42 (x) SS 1 1" + tail, Stat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.in))
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("ParseStat = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestStatOfSelf(t *testing.T) {
	tbl := &Table{}
	st, err := tbl.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.PGRP != syscall.Getpgrp() || st.StartTicks == 0 || st.Exited() {
		t.Fatalf("stat of self = %+v", st)
	}
	if _, err := tbl.Stat(1 << 30); err == nil {
		t.Fatal("stat of a process that cannot exist succeeded")
	}
	if id, err := tbl.BootID(); err != nil || len(id) < 32 {
		t.Fatalf("boot id %q, %v", id, err)
	}
}

// spawn starts sh -c script in its own process group with env, reaping it
// in the background (a killed process is a zombie until then).
func spawn(t *testing.T, script string, env ...string) (pid int, ticks uint64, done <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	go func() { _ = cmd.Wait(); close(ch) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-ch
	})
	ticks, err := (&Table{}).StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid, ticks, ch
}

func liveWith(t *testing.T, env string) []int {
	t.Helper()
	tbl := &Table{}
	pids, err := tbl.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range pids {
		if st, err := tbl.Stat(p); err == nil && !st.Exited() && tbl.Environ(p)[env] {
			out = append(out, p)
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEndKillsGroupAndEnvironment: the recorded group (its leader
// verified) and a process that left it but carries the attempt's
// environment are killed, and End returns once all of them have exited.
func TestEndKillsGroupAndEnvironment(t *testing.T) {
	key := "WF_IDEMPOTENCY_KEY=wf2-end-" + strconv.Itoa(os.Getpid())
	leader, ticks, done := spawn(t, "setsid sleep 60 & sleep 60; sleep 60", key, "WF_ATTEMPT=2")
	waitUntil(t, "three processes", func() bool { return len(liveWith(t, key)) == 3 })
	before := liveWith(t, key)
	boot, _ := (&Table{}).BootID()

	tbl := &Table{}
	ended, err := tbl.End([]Attempt{{Group: leader, GroupStart: ticks, GroupBoot: boot, Env: []string{key, "WF_ATTEMPT=2"}}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if left := liveWith(t, key); len(left) != 0 {
		t.Fatalf("alive after End: %v", left)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the leader did not exit")
	}
	e := ended[0]
	if e.Group != leader || !slices.Equal(e.Killed, before) || len(e.Survivors) != 0 {
		t.Fatalf("ended = %+v; want group %d, killed %v", e, leader, before)
	}
}

// TestEndByEnvironmentOnly: without a spawn record (or with the leader
// gone) the attempt's environment still finds its processes; another
// attempt number is left alone.
func TestEndByEnvironmentOnly(t *testing.T) {
	key := "WF_IDEMPOTENCY_KEY=wf2-env-" + strconv.Itoa(os.Getpid())
	spawn(t, "exec sleep 60", key, "WF_ATTEMPT=1")
	other, otherTicks, _ := spawn(t, "exec sleep 60", key, "WF_ATTEMPT=2")
	ended, err := (&Table{}).End([]Attempt{{Env: []string{key, "WF_ATTEMPT=1"}}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ended[0].Killed) != 1 || ended[0].Group != 0 {
		t.Fatalf("ended = %+v", ended[0])
	}
	if st, err := (&Table{}).Stat(other); err != nil || st.Exited() || st.StartTicks != otherTicks {
		t.Fatalf("attempt 2's process was touched: %+v, %v", st, err)
	}
}

// TestEndLeavesReusedPID: a recorded group whose leader PID now names a
// process with another start time (or another boot) is never signalled.
func TestEndLeavesReusedPID(t *testing.T) {
	pid, ticks, _ := spawn(t, "exec sleep 60")
	boot, _ := (&Table{}).BootID()
	for _, a := range []Attempt{
		{Group: pid, GroupStart: ticks + 1, GroupBoot: boot},
		{Group: pid, GroupStart: ticks, GroupBoot: "another-boot"},
	} {
		ended, err := (&Table{}).End([]Attempt{a}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ended[0].Group != 0 || len(ended[0].Killed) != 0 {
			t.Fatalf("End(%+v) = %+v; want nothing done", a, ended[0])
		}
		if st, err := (&Table{}).Stat(pid); err != nil || st.Exited() {
			t.Fatalf("the process that reused the PID was killed: %+v, %v", st, err)
		}
	}
}

// TestEndReportsSurvivors: a process that does not die (signals faked
// away here) is reported once the wait has passed.
func TestEndReportsSurvivors(t *testing.T) {
	key := "WF_IDEMPOTENCY_KEY=wf2-survive-" + strconv.Itoa(os.Getpid())
	pid, _, _ := spawn(t, "exec sleep 60", key, "WF_ATTEMPT=1")
	var sent []int
	tbl := &Table{Signal: func(p int, _ uint64, _ syscall.Signal) error { sent = append(sent, p); return nil }}
	start := time.Now()
	ended, err := tbl.End([]Attempt{{Env: []string{key, "WF_ATTEMPT=1"}}}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("End gave up after %v, before the wait", took)
	}
	if !slices.Equal(ended[0].Survivors, []int{pid}) || !slices.Contains(sent, pid) {
		t.Fatalf("ended = %+v, signals to %v; want survivor %d", ended[0], sent, pid)
	}
}

// TestEndZombieHasExited: a process that has exited but was not reaped
// yet is not waited for.
func TestEndZombieHasExited(t *testing.T) {
	key := "WF_IDEMPOTENCY_KEY=wf2-zombie-" + strconv.Itoa(os.Getpid())
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.Env = []string{key, "WF_ATTEMPT=1"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	tbl := &Table{}
	waitUntil(t, "the zombie", func() bool {
		st, err := tbl.Stat(cmd.Process.Pid)
		return err == nil && st.State == 'Z'
	})
	ended, err := tbl.End([]Attempt{{Env: []string{key, "WF_ATTEMPT=1"}}}, 10*time.Second)
	if err != nil || len(ended[0].Killed) != 0 || len(ended[0].Survivors) != 0 {
		t.Fatalf("End = %+v, %v; want nothing to do", ended, err)
	}
}

// TestSignalChecksStartTime: the default signal path refuses a PID whose
// start time differs from the one given.
func TestSignalChecksStartTime(t *testing.T) {
	pid, ticks, done := spawn(t, "exec sleep 60")
	tbl := &Table{}
	if err := tbl.signal(pid, ticks+1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if st, err := tbl.Stat(pid); err != nil || st.Exited() {
		t.Fatal("a process with another start time was signalled")
	}
	if err := tbl.signal(pid, ticks, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the process was not killed")
	}
	if err := tbl.signal(os.Getpid(), 0, syscall.SIGKILL); err == nil {
		t.Fatal("wf would signal itself")
	}
}
