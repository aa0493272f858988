package config

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func processCPUForTest(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCPUClockIsTheLoadsOwn: the backstop's clock does not run while
// other goroutines of the process burn CPU (a worker's activities, other
// tests, the collector), only while the load itself works.
func TestCPUClockIsTheLoadsOwn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is Linux's; elsewhere the clock is the process's")
	}
	unlock := lockCPUClock()
	start, pstart := threadCPU(), processCPUForTest(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Spin until the process has burnt 200 ms more, however slowly
		// a loaded machine gives it CPU.
		for processCPUForTest(t)-pstart < 200*time.Millisecond {
			for i := 0; i < 1e5; i++ {
				_ = i * i
			}
		}
	}()
	<-done
	own := threadCPU() - start
	unlock()
	if own > 100*time.Millisecond {
		t.Errorf("the load's clock ran %v while another goroutine burnt 200ms", own)
	}
}

// TestDeterministicLoadHasNoCPUBackstop: a load that would trip the CPU
// backstop passes when Deterministic, so that a Temporal replay never
// depends on how busy its worker is; the step budget still applies.
func TestDeterministicLoadHasNoCPUBackstop(t *testing.T) {
	saved := loadLimits
	loadLimits.cpuLimit = time.Nanosecond
	t.Cleanup(func() { loadLimits = saved })
	src := localX(`[for i in range(1000) : [for j in range(10) : i * j]]`)

	_, diags := load(t, src, LoadOptions{})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "of CPU time") {
		t.Fatalf("with a 1ns backstop the load should fail on CPU time, got %v", diags)
	}
	mustLoad(t, src, LoadOptions{Deterministic: true})

	_, diags = load(t, localX(`[for i in range(1000) : [for j in range(1000) : [for k in range(1000) : k]]]`), LoadOptions{Deterministic: true})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "more steps") {
		t.Fatalf("a deterministic load keeps the step budget, got %v", diags)
	}
}
