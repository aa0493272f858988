package executor

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// preciseTimer is the real clock's timer on Linux. Its wake-up is a
// goroutine blocked in a futex wait with a timeout, not a runtime timer.
//
// Why: a runtime timer fires only when some P runs the scheduler's timer
// check, and during a GC mark phase the Ps the program leaves idle run
// the GC's idle mark workers, which yield to runnable goroutines but never
// look at timers. A timer due meanwhile waits for the mark to end or for a
// preemption 10 ms later: in BenchmarkTimerLateness10k each GC during the
// 2 s of firing made every timer due in its 20–40 ms mark that late, which
// alone is more than 1 % of the timers (the p99). A thread woken by the
// kernel instead comes back from its syscall needing a P; with none idle
// its goroutine goes to the global run queue, which the idle mark workers
// do poll, so it runs within microseconds. The futex's timeout is also
// precise to the kernel's timer slack (~50 µs), where the runtime's
// netpoller sleeps in whole milliseconds (a timer due in 0.3 ms waited 1).
//
// The cost is a thread blocked in the kernel while the timer is armed
// (its P stays with it until sysmon hands the P to goroutines that need
// it, within a sysmon tick, as for any blocking syscall such as the
// committer's fdatasync), a futex wake per Reset or Stop of an armed
// timer, and a goroutine started per arming. The goroutine exits once the timer has fired or is stopped,
// so a dropped timer leaks nothing.
type preciseTimer struct {
	c chan time.Time
	// seq is the futex word: every Reset and Stop changes it, so a sleeper
	// about to wait on an old value returns at once instead of missing it.
	seq atomic.Uint32
	mu  sync.Mutex
	at  time.Time // when to fire; zero when not armed
	// sleeping says a sleeper goroutine is running (it clears it, under mu,
	// as it exits).
	sleeping bool
}

func newRealTimer(d time.Duration) Timer {
	t := &preciseTimer{c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (t *preciseTimer) C() <-chan time.Time { return t.c }

// Stop disarms the timer and drops a value not yet received, as a
// time.Timer does since Go 1.23: nothing stale is received after it. It
// reports whether the timer was armed or its value was still pending.
func (t *preciseTimer) Stop() bool {
	t.mu.Lock()
	stopped := !t.at.IsZero()
	t.at = time.Time{}
	if t.drain() {
		stopped = true
	}
	t.changed()
	return stopped
}

// Reset re-arms the timer to fire d from now; a value of the previous
// arming not yet received is dropped.
func (t *preciseTimer) Reset(d time.Duration) {
	t.mu.Lock()
	t.at = time.Now().Add(d)
	t.drain()
	if !t.sleeping {
		t.sleeping = true
		t.seq.Add(1)
		t.mu.Unlock()
		go t.sleep()
		return
	}
	t.changed()
}

// drain drops the value in c, if any; t.mu is held.
func (t *preciseTimer) drain() bool {
	select {
	case <-t.c:
		return true
	default:
		return false
	}
}

// changed tells a sleeping goroutine that the arming changed and unlocks
// t.mu. The wake is issued after the unlock so that the woken sleeper does
// not at once block on the mutex.
func (t *preciseTimer) changed() {
	t.seq.Add(1)
	wake := t.sleeping
	t.mu.Unlock()
	if wake {
		futexWake(&t.seq)
	}
}

// sleep waits until the timer is due, sends the time on c and exits; it
// exits without sending once the timer is stopped.
func (t *preciseTimer) sleep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for !t.at.IsZero() {
		d := time.Until(t.at)
		if d <= 0 {
			t.at = time.Time{}
			// c is empty (armed implies drained: Reset drains it as it
			// arms, and only this send fills it, disarming); the select
			// only makes sure a send can never block while t.mu is held.
			select {
			case t.c <- time.Now():
			default:
			}
			break
		}
		seq := t.seq.Load()
		t.mu.Unlock()
		futexWait(&t.seq, seq, d)
		t.mu.Lock()
	}
	t.sleeping = false
}

const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// futexWait blocks while *addr == val, for at most d. Every way it returns
// (woken, timed out, interrupted by a signal, or *addr already changed) is
// the same to its caller, which looks at the timer again.
func futexWait(addr *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitPrivate, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes the goroutine waiting on addr, if one is.
func futexWake(addr *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, 1, 0, 0, 0)
}
