package retry

import "time"

// maxPreviewSteps bounds the exact walk over waits that still grow. Only a
// pathological policy (say a coefficient of 1.0000001 with a huge cap)
// needs more; the remaining waits are then counted at the cap, which keeps
// TotalWait a true upper bound.
const maxPreviewSteps = 1 << 16

// Preview is the retry schedule of one policy, as `wf plan` shows it. It
// assumes attempts take no time, so TotalWait is an upper bound on the
// waiting the policy computes. A delay the activity asks for (Retry-After)
// replaces a computed wait, for at most RetryAfterCap each.
type Preview struct {
	// Attempts is MaximumAttempts; 0 means unlimited.
	Attempts int
	// Waits are the base waits (no jitter) between attempts, at most
	// maxShown of them.
	Waits []time.Duration
	// More is set when more waits exist than are shown.
	More bool
	// TotalWait is the sum of every base wait when the schedule is bounded
	// by attempts or expiration (never more than Expiration); 0 when
	// unbounded.
	TotalWait  time.Duration
	Jitter     Jitter
	Expiration time.Duration
	// Forever is set for unlimited attempts with no expiration.
	Forever bool
	// RetryAfterCap is the longest delay the activity may ask for that
	// replaces a computed wait (maximum_retry_after); 0 when the policy
	// does not honour such delays. Expiration still bounds the total.
	RetryAfterCap time.Duration `json:",omitempty"`
}

// Preview computes the schedule, showing at most maxShown waits. A wait is
// part of the schedule if an attempt remains after it and, with an
// expiration, the waits so far stay below the expiration (SPEC §3: the next
// attempt must start before it runs out).
func (p Policy) Preview(maxShown int) Preview {
	pv := Preview{
		Attempts:   max(p.MaximumAttempts, 0),
		Jitter:     p.Jitter,
		Expiration: max(p.Expiration, 0),
	}
	pv.Forever = pv.Attempts == 0 && pv.Expiration == 0
	if p.HonorRetryAfter {
		pv.RetryAfterCap = p.RetryAfterCap()
	}
	maxShown = max(maxShown, 0)

	// limit is the number of waits the attempt count allows; -1 = no limit.
	limit := int64(-1)
	if pv.Attempts > 0 {
		limit = int64(pv.Attempts) - 1
	}
	var total time.Duration
	k := int64(0) // waits accepted so far
	capD := p.Cap()
	for steps := 0; limit < 0 || k < limit; steps++ {
		d := p.BaseDelay(int(min(k+1, int64(maxInt))))
		if p.steady(d, capD) || steps >= maxPreviewSteps {
			if steps >= maxPreviewSteps && capD > 0 {
				d = capD
			}
			pv.addSteady(d, k, limit, total, maxShown)
			return pv
		}
		if pv.Expiration > 0 && addSat(total, d) >= pv.Expiration {
			break
		}
		total = addSat(total, d)
		k++
		if int64(len(pv.Waits)) < int64(maxShown) {
			pv.Waits = append(pv.Waits, d)
		} else {
			pv.More = true
		}
	}
	if !pv.Forever {
		pv.TotalWait = total
	}
	return pv
}

const maxInt = int(^uint(0) >> 1)

// steady reports whether every wait from here on equals d, so the rest of
// the schedule can be counted instead of walked.
func (p Policy) steady(d, capD time.Duration) bool {
	switch {
	case capD > 0 && d >= capD, p.InitialInterval <= 0, p.Backoff == Fixed:
		return true
	case p.Backoff == Linear:
		return false
	}
	return p.Coefficient != 0 && !(p.Coefficient > 1)
}

// addSteady finishes a preview whose remaining waits all equal d, given k
// waits summing to total already accepted.
func (pv *Preview) addSteady(d time.Duration, k, limit int64, total time.Duration, maxShown int) {
	// remaining is how many more waits fit; -1 means infinitely many.
	remaining := int64(-1)
	if limit >= 0 {
		remaining = limit - k
	}
	if pv.Expiration > 0 {
		// Waits j = 1.. fit while total + j*d < Expiration.
		var fit int64
		switch {
		case total >= pv.Expiration:
			fit = 0
		case d == 0:
			fit = -1
		default:
			fit = int64((pv.Expiration - total - 1) / d)
		}
		if fit >= 0 && (remaining < 0 || fit < remaining) {
			remaining = fit
		}
	}
	added := int64(0)
	for (remaining < 0 || added < remaining) && len(pv.Waits) < maxShown {
		pv.Waits = append(pv.Waits, d)
		added++
	}
	if remaining < 0 || remaining > added {
		pv.More = true
	}
	if pv.Forever {
		return
	}
	if remaining < 0 {
		// Infinitely many zero waits within an expiration: nothing adds up.
		pv.TotalWait = total
		return
	}
	pv.TotalWait = addSat(total, mulSat(d, remaining))
}

func addSat(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

func mulSat(d time.Duration, n int64) time.Duration {
	if d == 0 || n == 0 {
		return 0
	}
	if n > int64(maxDuration/d) {
		return maxDuration
	}
	return d * time.Duration(n)
}
