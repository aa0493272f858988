package retry

import "time"

// Breaker is a circuit_breaker block (SPEC §11): it opens when at least
// FailureRatio of the calls in a sliding Window failed, once the window
// holds at least MinimumCalls; it then refuses every call for
// BreakDuration, lets HalfOpenCalls trial calls through (half-open), and
// closes once all of them succeeded, or opens again at the first that
// failed.
//
// The window is kept as WindowBuckets counts of Window/WindowBuckets each
// (aligned to the zero time, so every engine buckets alike), as
// resilience4j and Polly do: its size, and so the cost of keeping it
// durable, does not grow with the call rate. An outcome counts for at
// most Window and at least Window minus one bucket.
type Breaker struct {
	Name          string
	FailureRatio  float64
	MinimumCalls  int
	Window        time.Duration
	BreakDuration time.Duration
	HalfOpenCalls int
	// Failures are the error patterns that count as failures; empty means
	// every error but "interrupted". An interrupted attempt never counts,
	// whatever the patterns say (SPEC §4.1).
	Failures []string
}

// CircuitState is where a breaker is.
type CircuitState string

const (
	CircuitClosed   CircuitState = "closed"
	CircuitOpen     CircuitState = "open"
	CircuitHalfOpen CircuitState = "half_open"
)

// Circuit is the state of one breaker: everything about it that must
// survive a crash. It holds no count of calls in flight: after a crash no
// attempt runs, so none is.
type Circuit struct {
	State CircuitState
	// Since is when the circuit entered State.
	Since time.Time
	// HalfOpenAt is when an open circuit lets trial calls through.
	HalfOpenAt time.Time
	// Buckets count the outcomes in the window while closed, oldest
	// first.
	Buckets []Bucket
	// TrialSuccesses counts the trial calls that succeeded (half-open).
	TrialSuccesses int
	// Epoch increases with every change of State. A call is let through
	// in an epoch; its outcome counts only in that epoch, so an attempt
	// that started before the circuit opened cannot count as a trial.
	Epoch int
	// OpenedBy is the window that opened a circuit (closed to open):
	// its calls and failures, for the views. Not part of the state.
	OpenedBy struct{ Calls, Failures int }
}

// Bucket counts the outcomes of one slice of a breaker's window: the
// outcomes at or after Start and before the next bucket's start.
type Bucket struct {
	Start     time.Time
	Successes int
	Failures  int
}

// WindowBuckets is how many buckets a window is kept in.
const WindowBuckets = 20

// Outcome is how a call let through by a breaker ended, as it sees it.
type Outcome int

const (
	// OutcomeSuccess: the call succeeded, or failed with an error the breaker
	// does not count (the downstream answered).
	OutcomeSuccess Outcome = iota
	// OutcomeFailure: an error that counts.
	OutcomeFailure
	// OutcomeIgnored: neither (an interrupted attempt); a trial slot it held is
	// free again.
	OutcomeIgnored
)

// typeInterrupted is the error type of an attempt the engine cut short.
const typeInterrupted = "interrupted"

// Classify says how the breaker counts an attempt that failed with an
// error of type typ.
func (b *Breaker) Classify(typ string) Outcome {
	switch {
	case typ == typeInterrupted:
		return OutcomeIgnored
	case len(b.Failures) == 0 || MatchAny(b.Failures, typ):
		return OutcomeFailure
	}
	return OutcomeSuccess
}

// Due reports whether At would change the circuit at now.
func (b *Breaker) Due(c *Circuit, now time.Time) bool {
	return c.State == CircuitOpen && !now.Before(c.HalfOpenAt)
}

// At returns the circuit as it is at now: an open circuit whose break is
// over is half-open. changed reports that transition.
func (b *Breaker) At(c Circuit, now time.Time) (out Circuit, changed bool) {
	if c.State == CircuitOpen && !now.Before(c.HalfOpenAt) {
		return Circuit{State: CircuitHalfOpen, Since: c.HalfOpenAt, Epoch: c.Epoch + 1}, true
	}
	if c.State == "" {
		c.State = CircuitClosed
	}
	return c, false
}

// Permit says whether one more call may start at now, given the trial
// calls in flight (half-open). When it may not, wait is when to ask again:
// the end of the break (open), or zero when a trial call must end first
// (half-open, every trial slot taken). c must be At(now).
func (b *Breaker) Permit(c Circuit, now time.Time, trialsInFlight int) (ok bool, wait time.Time) {
	switch c.State {
	case CircuitOpen:
		return false, c.HalfOpenAt
	case CircuitHalfOpen:
		if c.TrialSuccesses+trialsInFlight < max(b.HalfOpenCalls, 1) {
			return true, time.Time{}
		}
		return false, time.Time{}
	}
	return true, time.Time{}
}

// Record counts the outcome, at now, of a call let through in epoch and
// returns the circuit after it (c must be At(now)). It may write into c's
// buckets (a call costs no allocation once the window is warm): keep no
// other reference to them. An outcome from another epoch changes nothing. Closed: the outcome joins the window, and
// a failure that brings the window to MinimumCalls calls of which at least
// FailureRatio failed opens the circuit. Half-open: a failure opens it
// again, and the HalfOpenCalls-th success closes it with an empty window.
func (b *Breaker) Record(c Circuit, epoch int, o Outcome, now time.Time) Circuit {
	if epoch != c.Epoch || o == OutcomeIgnored {
		return c
	}
	switch c.State {
	case CircuitHalfOpen:
		if o == OutcomeFailure {
			return b.open(c, now)
		}
		c.TrialSuccesses++
		if c.TrialSuccesses >= max(b.HalfOpenCalls, 1) {
			return Circuit{State: CircuitClosed, Since: now, Epoch: c.Epoch + 1}
		}
		return c
	case CircuitOpen:
		return c
	}
	// Drop the buckets that left the window, keeping the array.
	bs := c.Buckets
	if live := b.live(bs, now); len(live) < len(bs) {
		bs = bs[:copy(bs, live)]
	}
	if n := len(bs); n == 0 || !now.Before(bs[n-1].Start.Add(b.bucketWidth())) {
		bs = append(bs, Bucket{Start: b.bucketStart(now)})
	}
	last := &bs[len(bs)-1]
	if o == OutcomeSuccess {
		last.Successes++
		c.Buckets = bs
		return c
	}
	last.Failures++
	c.Buckets = bs
	if calls, failures := b.Calls(c, now); calls >= max(b.MinimumCalls, 1) &&
		float64(failures) >= b.FailureRatio*float64(calls) {
		o := b.open(c, now)
		o.OpenedBy.Calls, o.OpenedBy.Failures = calls, failures
		return o
	}
	return c
}

func (b *Breaker) open(c Circuit, now time.Time) Circuit {
	return Circuit{State: CircuitOpen, Since: now, HalfOpenAt: now.Add(b.BreakDuration), Epoch: c.Epoch + 1}
}

// Calls returns the outcomes in the window ending at now: how many calls,
// and how many of them failed.
func (b *Breaker) Calls(c Circuit, now time.Time) (calls, failures int) {
	for _, bk := range b.live(c.Buckets, now) {
		calls += bk.Successes + bk.Failures
		failures += bk.Failures
	}
	return calls, failures
}

func (b *Breaker) bucketWidth() time.Duration {
	return max(b.Window/WindowBuckets, 1)
}

// bucketStart is the start of the bucket now falls in, buckets being
// aligned to the Unix epoch.
func (b *Breaker) bucketStart(now time.Time) time.Time {
	ns, w := now.UnixNano(), int64(b.bucketWidth())
	r := ns % w
	if r < 0 {
		r += w
	}
	return time.Unix(0, ns-r).UTC()
}

// live is the tail of buckets still in the window ending at now: those
// that started after now-Window. Buckets are oldest first.
func (b *Breaker) live(bs []Bucket, now time.Time) []Bucket {
	from := now.Add(-b.Window)
	i := 0
	for i < len(bs) && !bs[i].Start.After(from) {
		i++
	}
	return bs[i:]
}
