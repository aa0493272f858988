package executor

import "time"

// Clock is the executor's source of time. Tests inject a fake one so that
// retries hours apart run in microseconds.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the executor uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
	// Reset re-arms the timer to fire after d.
	Reset(d time.Duration)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// NewTimer returns, on Linux, a timer whose wake-up does not depend on the
// runtime's timer processing (see clock_linux.go); elsewhere a time.Timer.
func (realClock) NewTimer(d time.Duration) Timer { return newRealTimer(d) }

// realTimer is a time.Timer: the real clock's timer where no precise one
// is implemented.
type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Reset relies on Go 1.23+ timer semantics: no stale value can be received
// after Reset, so no drain is needed.
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }
