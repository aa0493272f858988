// Package retry is the pure arithmetic of retrying: backoff delays, jitter,
// error-pattern matching, the retry decision and retry budgets.
//
// It performs no I/O, reads no clock and uses no global random source: time
// and randomness are always passed in, so every result can be replayed.
package retry

import "time"

// DefaultMaximumRetryAfter is maximum_retry_after when a policy leaves it out.
const DefaultMaximumRetryAfter = time.Hour

// Backoff names how the base wait grows from one attempt to the next.
type Backoff string

const (
	Exponential Backoff = "exponential"
	Linear      Backoff = "linear"
	Fixed       Backoff = "fixed"
)

// JitterMode names how a capped wait is randomised.
type JitterMode string

const (
	JitterNone         JitterMode = "none"
	JitterFull         JitterMode = "full"
	JitterEqual        JitterMode = "equal"
	JitterDecorrelated JitterMode = "decorrelated"
	// JitterFraction multiplies the wait by a uniform draw in [1-f, 1+f].
	JitterFraction JitterMode = "fraction"
)

// Jitter is a jitter mode and, for JitterFraction, its fraction f in (0,1].
type Jitter struct {
	Mode     JitterMode
	Fraction float64
}

// Policy is one fully resolved retry policy (defaults applied).
type Policy struct {
	Backoff         Backoff
	InitialInterval time.Duration
	// Coefficient is the exponential growth factor (>= 1).
	Coefficient float64
	// MaximumInterval caps one wait (before jitter). The loader sets it to
	// 100 x InitialInterval when the user leaves it out.
	MaximumInterval time.Duration
	// MaximumAttempts counts the first attempt; 0 means unlimited.
	MaximumAttempts int
	// Expiration bounds the total time from the first attempt's start; 0
	// means unlimited.
	Expiration      time.Duration
	Jitter          Jitter
	NonRetryable    []string
	Retryable       []string
	HonorRetryAfter bool
	// MaximumRetryAfter caps a delay the activity asks for (HTTP
	// Retry-After, retry_after in the error file) when HonorRetryAfter is
	// set; 0 means DefaultMaximumRetryAfter, so a policy built without the
	// loader cannot park a retry for centuries either.
	MaximumRetryAfter time.Duration
	// Budget names the retry_budget this policy draws from; "" for none.
	Budget string
	// CircuitBreaker names the circuit_breaker every attempt of the
	// activity must pass; "" for none.
	CircuitBreaker string
	// OnOpen is what an attempt does while that breaker is open: "wait"
	// (the default: it waits, durably, until the breaker lets it through)
	// or "fail" (the activity fails with circuit_open).
	OnOpen string
}

// Failure describes one failed attempt as the retry decision sees it.
type Failure struct {
	Type    string
	Message string
	// NonRetryable is set when the activity itself flagged the error.
	NonRetryable bool
	// RetryAfter is the wait the activity (or server) asked for; valid only
	// when HasRetryAfter is true.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Predicate is a compiled retry_if expression. attempt is the number of the
// attempt that just failed (1-based, across all rules); elapsed is the time
// since the activity's first attempt started.
type Predicate func(f Failure, attempt int, elapsed time.Duration) (bool, error)

// Rule is one `retry` block: the failures it matches (On; empty matches
// everything) and how they are retried.
type Rule struct {
	On      []string
	Policy  Policy
	RetryIf Predicate
}

// Budget is a retry_budget: at most MaxRetries retries (not first attempts)
// in any sliding Window.
type Budget struct {
	Name        string
	MaxRetries  int
	Window      time.Duration
	OnExhausted string // "wait" | "fail"
	// Parent names the budget this one draws from too ("" for none): a
	// retry takes a token from the budget and every ancestor (SPEC §11).
	Parent string
}

// Rand is the only source of randomness the package uses; *math/rand/v2.Rand
// satisfies it.
type Rand interface {
	Float64() float64
}
