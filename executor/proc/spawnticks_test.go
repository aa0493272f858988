package proc

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func bootClock(t *testing.T) time.Duration {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatalf("CLOCK_BOOTTIME (Linux has it since 2.6.39): %v", err)
	}
	return time.Duration(ts.Nano())
}

// startBracketed starts a child that waits for its stdin to close, with
// CLOCK_BOOTTIME read just before and after the fork, as the exec runner
// does.
func startBracketed(t *testing.T) (pid int, before, after time.Duration) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read x")
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	before = bootClock(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	after = bootClock(t)
	t.Cleanup(func() {
		w.Close()
		cmd.Wait()
	})
	return cmd.Process.Pid, before, after
}

// TestSpawnTicksFromTheClock: the start time SpawnTicks gives a freshly
// forked child is the one /proc gives, whether it came from the clock or
// from /proc; once /proc has confirmed the clock, a fork within one tick
// is not looked up at all.
func TestSpawnTicksFromTheClock(t *testing.T) {
	tbl := &Table{}
	fromClock := 0
	for range 30 {
		pid, before, after := startBracketed(t)
		clock := tbl.bootClock.Load() == clockAgrees && bootTicks(before) == bootTicks(after)
		got, err := tbl.SpawnTicks(pid, before, after)
		if err != nil {
			t.Fatal(err)
		}
		want, err := tbl.StartTicks(pid)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("SpawnTicks(%d) = %d, /proc says %d (clock %v..%v)", pid, got, want, before, after)
		}
		if clock {
			fromClock++
		}
	}
	if tbl.bootClock.Load() != clockAgrees {
		t.Fatalf("the clock was never confirmed (state %d)", tbl.bootClock.Load())
	}
	if fromClock == 0 {
		t.Fatal("no start time came from the clock")
	}
	// Confirmed: within one tick, /proc is not read (no such process).
	now := bootClock(t)
	if got, err := tbl.SpawnTicks(1<<30, now, now); err != nil || got != bootTicks(now) {
		t.Fatalf("SpawnTicks from the clock = %d, %v; want %d", got, err, bootTicks(now))
	}
}

// TestSpawnTicksDistrustsAWrongClock: a clock that disagrees with /proc
// once (a time namespace, another USER_HZ) is never used again; a fake
// /proc never uses it.
func TestSpawnTicksDistrustsAWrongClock(t *testing.T) {
	tbl := &Table{}
	pid, _, _ := startBracketed(t)
	want, err := tbl.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	wrong := time.Duration(want+1000) * (time.Second / userHZ)
	if got, err := tbl.SpawnTicks(pid, wrong, wrong); err != nil || got != want {
		t.Fatalf("SpawnTicks with a wrong clock = %d, %v; want /proc's %d", got, err, want)
	}
	if tbl.bootClock.Load() != clockDisagrees {
		t.Fatalf("clock state %d after a disagreement", tbl.bootClock.Load())
	}
	pid, before, after := startBracketed(t)
	want, _ = tbl.StartTicks(pid)
	if got, err := tbl.SpawnTicks(pid, before, after); err != nil || got != want {
		t.Fatalf("SpawnTicks = %d, %v; want /proc's %d", got, err, want)
	}
	if tbl.bootClock.Load() != clockDisagrees {
		t.Fatal("a distrusted clock was trusted again")
	}

	fake := &Table{Root: t.TempDir()}
	fake.bootClock.Store(clockAgrees)
	now := bootClock(t)
	if _, err := fake.SpawnTicks(4242, now, now); err == nil {
		t.Fatal("SpawnTicks on a fake /proc did not read it")
	}
}
