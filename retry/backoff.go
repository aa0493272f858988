package retry

import (
	"math"
	"time"
)

// maxDuration is the largest representable wait; every computation
// saturates here instead of wrapping around to a negative duration.
const maxDuration = time.Duration(math.MaxInt64)

// defaultCoefficient is used when an exponential policy leaves the
// coefficient at zero (the loader normally fills it in); it matches
// Temporal's default.
const defaultCoefficient = 2.0

// Cap is the effective cap on one wait: MaximumInterval, or 100 x
// InitialInterval when MaximumInterval is 0.
func (p Policy) Cap() time.Duration {
	if p.MaximumInterval > 0 {
		return p.MaximumInterval
	}
	if p.InitialInterval <= 0 {
		return 0
	}
	if p.InitialInterval > maxDuration/100 {
		return maxDuration
	}
	return 100 * p.InitialInterval
}

// BaseDelay is the wait after attempt n (1-based) failed, capped at Cap and
// before jitter. n below 1 is treated as 1. It never overflows: a huge n
// simply yields the cap.
func (p Policy) BaseDelay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	initial := max(p.InitialInterval, 0)
	limit := p.Cap()
	var d time.Duration
	switch p.Backoff {
	case Linear:
		if initial > 0 && int64(n) > int64(maxDuration/initial) {
			d = maxDuration
		} else {
			d = initial * time.Duration(n)
		}
	case Fixed:
		d = initial
	default: // Exponential, and the zero value.
		coef := p.Coefficient
		if coef == 0 {
			coef = defaultCoefficient
		}
		if coef < 1 || math.IsNaN(coef) {
			coef = 1 // validation forbids < 1; never shrink the wait
		}
		d = saturate(float64(initial) * math.Pow(coef, float64(n-1)))
	}
	if limit > 0 && d > limit {
		d = limit
	}
	return d
}

// saturate converts nanoseconds held in a float to a Duration, clamping to
// [0, maxDuration] (Inf and NaN included) instead of overflowing.
func saturate(ns float64) time.Duration {
	switch {
	case math.IsNaN(ns) || ns <= 0:
		return 0
	case ns >= float64(maxDuration):
		return maxDuration
	}
	return time.Duration(ns)
}

// Delay is the jittered wait after attempt n failed. prev is the previous
// wait, used only by decorrelated jitter (0 on the first retry, in which
// case InitialInterval stands in for it). r supplies the randomness; a nil
// r yields the unjittered base delay rather than a panic.
func (p Policy) Delay(n int, prev time.Duration, r Rand) time.Duration {
	d := p.BaseDelay(n)
	if r == nil {
		return d
	}
	switch p.Jitter.Mode {
	case JitterFull:
		return saturate(float64(d) * r.Float64())
	case JitterEqual:
		half := d / 2
		return half + saturate(float64(d-half)*r.Float64())
	case JitterDecorrelated:
		// AWS "decorrelated jitter": the wait grows from the previous
		// wait rather than from n, which spreads clients that failed
		// together without needing a shared attempt counter.
		lo := max(p.InitialInterval, 0)
		if prev <= 0 {
			prev = lo
		}
		hi := saturate(3 * float64(prev))
		if hi < lo {
			hi = lo
		}
		v := saturate(float64(lo) + float64(hi-lo)*r.Float64())
		if limit := p.Cap(); limit > 0 && v > limit {
			v = limit
		}
		return v
	case JitterFraction:
		f := p.Jitter.Fraction
		if f <= 0 || math.IsNaN(f) {
			return d
		}
		f = min(f, 1)
		return saturate(float64(d) * (1 - f + 2*f*r.Float64()))
	default: // JitterNone and the zero value
		return d
	}
}
