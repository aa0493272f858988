package executor

import (
	"runtime"
	"testing"
	"time"
)

func TestPreciseTimerFiresOnceAfterItsDuration(t *testing.T) {
	start := time.Now()
	tm := newRealTimer(20 * time.Millisecond)
	at := <-tm.C()
	if got := at.Sub(start); got < 20*time.Millisecond {
		t.Fatalf("fired after %v, want at least 20ms", got)
	}
	select {
	case <-tm.C():
		t.Fatal("fired twice")
	case <-time.After(30 * time.Millisecond):
	}
	if tm.Stop() {
		t.Error("Stop of a fired and received timer reported it stopped")
	}
}

func TestPreciseTimerStopAndReset(t *testing.T) {
	tm := newRealTimer(time.Hour)
	if !tm.Stop() {
		t.Error("Stop of an armed timer reported nothing stopped")
	}
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	case <-time.After(20 * time.Millisecond):
	}
	// Re-armed earlier than a sleeping arming: the new deadline wins.
	tm.Reset(time.Hour)
	start := time.Now()
	tm.Reset(10 * time.Millisecond)
	select {
	case at := <-tm.C():
		if at.Sub(start) < 10*time.Millisecond {
			t.Fatalf("fired after %v, want at least 10ms", at.Sub(start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a timer re-armed to 10ms did not fire")
	}
	// A value not received is dropped by Reset: nothing stale afterwards.
	tm.Reset(0)
	time.Sleep(20 * time.Millisecond)
	tm.Reset(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("received the value of the arming before Reset")
	case <-time.After(20 * time.Millisecond):
	}
	tm.Stop()
}

func TestPreciseTimerManyResets(t *testing.T) {
	// The loop re-arms its timer after nearly every step: every arming
	// must fire exactly once, none early, none lost.
	tm := newRealTimer(time.Hour)
	defer tm.Stop()
	for i := range 200 {
		d := time.Duration(i%7) * 50 * time.Microsecond
		armed := time.Now()
		tm.Reset(d)
		select {
		case at := <-tm.C():
			if at.Sub(armed) < d {
				t.Fatalf("arming %d: fired after %v, want at least %v", i, at.Sub(armed), d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("arming %d (%v) did not fire", i, d)
		}
	}
}

// BenchmarkWakeDuringGC measures what preciseTimer is for: the lateness of
// short sleeps (300 µs, as the loop's wake-ups in BenchmarkTimerLateness10k
// are 200 µs apart) taken while a collection marks a 100 MB pointer-rich
// heap, with a runtime timer ("go") and with the futex sleeper ("precise").
// Nothing else runs, so the Ps the sleeps leave idle run idle mark workers.
func BenchmarkWakeDuringGC(b *testing.B) {
	type node struct {
		next *node
		_    [6]*int
	}
	live := make([]*node, 100<<20/64)
	for i := range live {
		live[i] = &node{}
		if i > 0 {
			live[i].next = live[i-1]
		}
	}
	for _, kind := range []string{"go", "precise"} {
		b.Run(kind, func(b *testing.B) {
			var tm Timer = newRealTimer(time.Hour)
			if kind == "go" {
				tm.Stop()
				tm = realTimer{time.NewTimer(time.Hour)}
			}
			defer tm.Stop()
			var late []time.Duration
			for range b.N {
				done := make(chan struct{})
				go func() { runtime.GC(); close(done) }()
				for marking := true; marking; {
					due := time.Now().Add(300 * time.Microsecond)
					tm.Reset(300 * time.Microsecond)
					<-tm.C()
					late = append(late, time.Since(due))
					select {
					case <-done:
						marking = false
					default:
					}
				}
			}
			reportLateness(b, late)
			b.ReportMetric(float64(len(late))/float64(b.N), "wakes/gc")
		})
	}
	runtime.KeepAlive(live)
}
