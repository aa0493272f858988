package config

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used. A load locks
// its goroutine to its thread (lockCPUClock), so this is the load's own
// work: what other goroutines of the process burn meanwhile (a worker's
// activities, parallel tests, the garbage collector's background workers)
// is not charged to the configuration.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lockCPUClock pins the calling goroutine to its thread for as long as
// threadCPU must measure it; the returned func releases it.
func lockCPUClock() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
