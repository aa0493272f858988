package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestApplyAfterKillWaitsForALeftoverLock: kill -9 of an apply caught
// while it forks an exec activity leaves the state's lock held for a
// moment by the child, which shares the lock's open file until its exec
// closes it. The next apply must wait for that lock, not fail on it. The
// test stands in for the child: once the first apply is killed it takes
// the lock itself (wf.lock still names the killed apply), starts the
// second apply, and lets go only once that apply has opened wf.lock and so
// found it locked; the second apply must then run to the end.
func TestApplyAfterKillWaitsForALeftoverLock(t *testing.T) {
	t.Parallel()
	dir := durSetup(t, `
workflow "dur" {
  key = "leftover-lock"
  activity "slow" {
    exec {
      script = "./rec.sh; while [ ! -f release ]; do sleep 0.05; done"
      env    = { LOG = "log" }
    }
  }
}
`)
	first := durStart(t, dir)
	first.waitEvent(t, 60*time.Second, "the first attempt", isType("attempt_started"))
	first.kill9(t)

	lockPath := filepath.Join(dir, ".wf", "wf.lock")
	named, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "pid " + strconv.Itoa(first.cmd.Process.Pid) + "\n"; !strings.HasPrefix(string(named), want) {
		t.Fatalf("wf.lock after the kill holds %q, want it to name the killed apply (%q)", named, want)
	}
	held, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the killed apply's lock is still held: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	second := durStart(t, dir)
	// The second apply opens wf.lock only to take it: once it has it
	// open, it has found it locked (the test holds it).
	deadline := time.Now().Add(60 * time.Second)
	for !hasOpen(second.cmd.Process.Pid, lockPath) {
		if second.exited() || time.Now().After(deadline) {
			t.Fatalf("the second apply exited (%d) or never opened wf.lock; stderr:\n%s", second.exit, second.stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if second.exited() {
		t.Fatalf("the second apply gave up on the leftover lock (exit %d); stderr:\n%s", second.exit, second.stderr.String())
	}
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if code := second.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("the second apply exited %d; stderr:\n%s", code, second.stderr.String())
	}
	if strings.Contains(second.stderr.String(), "locked") {
		t.Errorf("the second apply spoke of the lock:\n%s", second.stderr.String())
	}
}

// hasOpen reports whether process pid has path open.
func hasOpen(pid int, path string) bool {
	fds := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(fds)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}
