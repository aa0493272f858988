package activity

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

type spawnHookKey struct{}

// Spawned is an exec attempt's process as the spawn hook learns it.
type Spawned struct {
	// PID is the process's ID, also its process group's: it leads the
	// attempt's own group.
	PID int
	// BootBefore and BootAfter are CLOCK_BOOTTIME just before and just
	// after the fork (0 when it could not be read): the kernel stamped
	// the process's start (field 22 of /proc/PID/stat) between them, so
	// the start time is known without reading /proc when both fall in
	// the same clock tick (proc.Table.SpawnTicks).
	BootBefore, BootAfter time.Duration
}

// WithSpawnHook returns a context under which every exec attempt calls
// hook with its process (the leader of the attempt's own process group)
// as soon as the process has started, before waiting for it. The executor
// records it there, so that a later run can end an attempt that a crashed
// engine left behind. The hook runs on the attempt's goroutine; the
// attempt waits for it.
func WithSpawnHook(ctx context.Context, hook func(Spawned)) context.Context {
	return context.WithValue(ctx, spawnHookKey{}, hook)
}

func spawnHook(ctx context.Context) func(Spawned) {
	h, _ := ctx.Value(spawnHookKey{}).(func(Spawned))
	return h
}

// bootNow reads CLOCK_BOOTTIME, the clock the kernel stamps a new
// process's start with; 0 if it cannot be read.
func bootNow() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
