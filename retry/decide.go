package retry

import "time"

// Reasons a failure is not retried; they are the `reason` values of the
// activity_failed event.
const (
	ReasonNonRetryable = "non_retryable"
	ReasonMaxAttempts  = "max_attempts"
	ReasonExpired      = "expired"
	ReasonRetryIf      = "retry_if"
)

// Sources of a retry delay.
const (
	SourcePolicy = "policy"
	SourceServer = "server"
)

// Input is everything the retry decision depends on. The caller supplies
// the clock and the random source, so a decision can be replayed.
type Input struct {
	Rules   []Rule
	Failure Failure
	// Attempt is the number of the attempt that just failed, 1-based,
	// across all rules.
	Attempt int
	// RuleCounts holds the failures each rule matched before this one; a
	// slice shorter than Rules means the missing counts are 0.
	RuleCounts []int
	// FirstStart is when attempt 1 started.
	FirstStart time.Time
	// Now is when the failure is being decided.
	Now time.Time
	// PrevDelay is the previous wait (decorrelated jitter).
	PrevDelay time.Duration
	Rand      Rand
}

// Decision is the outcome of Decide.
type Decision struct {
	Retry bool
	// Rule is the index of the deciding rule, -1 if none matched.
	Rule int
	// RuleCounts is an updated copy of Input.RuleCounts, one entry per
	// rule, with the deciding rule's count incremented.
	RuleCounts []int
	// Delay is the wait before the next attempt, when Retry.
	Delay time.Duration
	// Source is SourcePolicy, or SourceServer when a Retry-After was
	// honoured.
	Source string
	// Requested is the delay the activity asked for, when Source is
	// SourceServer; Capped says it was longer than the policy's
	// maximum_retry_after, so Delay is that cap instead.
	Requested time.Duration
	Capped    bool
	// Reason says why not, when !Retry.
	Reason string
	// Err is a retry_if evaluation error (Retry false, Reason retry_if).
	Err error
}

// NotRetriedByDefault reports the error types that say the configuration
// is wrong (exec:not_found, a command that does not exist): no rule
// retries them unless it names them, in retryable_errors or in its on
// patterns.
func NotRetriedByDefault(errorType string) bool { return errorType == "exec:not_found" }

// Decide applies SPEC §3 to one failure: it picks the deciding rule and
// says whether and when to retry. The budget is not consulted here: it is
// shared state the executor checks once Decide says yes.
func Decide(in Input) Decision {
	counts := make([]int, len(in.Rules))
	copy(counts, in.RuleCounts)
	dec := Decision{Rule: -1, RuleCounts: counts}
	no := func(reason string) Decision {
		dec.Retry, dec.Reason = false, reason
		return dec
	}

	if in.Failure.NonRetryable {
		return no(ReasonNonRetryable)
	}
	if len(in.Rules) == 0 {
		// An activity without retry gets exactly one attempt.
		return no(ReasonMaxAttempts)
	}
	idx := -1
	for i, r := range in.Rules {
		if len(r.On) == 0 || MatchAny(r.On, in.Failure.Type) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return no(ReasonNonRetryable)
	}
	rule := in.Rules[idx]
	pol := rule.Policy
	dec.Rule = idx
	counts[idx]++
	n := counts[idx]

	if MatchAny(pol.NonRetryable, in.Failure.Type) {
		return no(ReasonNonRetryable)
	}
	if NotRetriedByDefault(in.Failure.Type) && !MatchAny(pol.Retryable, in.Failure.Type) &&
		(len(rule.On) == 0 || !MatchAny(rule.On, in.Failure.Type)) {
		// A mistake in the configuration: retrying cannot fix it, unless
		// the user said so by naming it.
		return no(ReasonNonRetryable)
	}
	if len(pol.Retryable) > 0 && !MatchAny(pol.Retryable, in.Failure.Type) {
		return no(ReasonNonRetryable)
	}
	if pol.MaximumAttempts > 0 && n >= pol.MaximumAttempts {
		return no(ReasonMaxAttempts)
	}

	delay, source := pol.Delay(n, in.PrevDelay, in.Rand), SourcePolicy
	var requested time.Duration
	capped := false
	if in.Failure.HasRetryAfter && pol.HonorRetryAfter {
		requested = max(in.Failure.RetryAfter, 0)
		delay, source = requested, SourceServer
		if limit := pol.RetryAfterCap(); delay > limit {
			delay, capped = limit, true
		}
	}
	if pol.Expiration > 0 {
		deadline := in.FirstStart.Add(pol.Expiration)
		if !in.Now.Add(delay).Before(deadline) {
			return no(ReasonExpired)
		}
	}
	if rule.RetryIf != nil {
		ok, err := rule.RetryIf(in.Failure, in.Attempt, in.Now.Sub(in.FirstStart))
		if err != nil {
			dec.Err = err
			return no(ReasonRetryIf)
		}
		if !ok {
			return no(ReasonRetryIf)
		}
	}
	dec.Retry, dec.Delay, dec.Source = true, delay, source
	dec.Requested, dec.Capped = requested, capped
	return dec
}

// RetryAfterCap is the longest delay an activity may ask for that the
// policy honours: MaximumRetryAfter, or DefaultMaximumRetryAfter when unset.
func (p Policy) RetryAfterCap() time.Duration {
	if p.MaximumRetryAfter > 0 {
		return p.MaximumRetryAfter
	}
	return DefaultMaximumRetryAfter
}
