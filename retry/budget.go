package retry

import (
	"slices"
	"time"
)

// inWindow reports whether a grant stamped at t still counts at now: the
// window is the half-open interval (now-Window, now].
func (b Budget) inWindow(t, now time.Time) bool {
	return t.After(now.Add(-b.Window)) && !t.After(now)
}

// Used counts the grant stamps inside the sliding window ending at now.
func (b Budget) Used(stamps []time.Time, now time.Time) int {
	n := 0
	for _, t := range stamps {
		if b.inWindow(t, now) {
			n++
		}
	}
	return n
}

// Allow reports whether one more retry may be granted at now. When it may
// not, nextFree is the moment enough in-window grants will have left the
// window for one more to fit (for a full budget: when the oldest in-window
// stamp leaves). A budget with MaxRetries <= 0 never frees: nextFree is
// then the zero time.
func (b Budget) Allow(stamps []time.Time, now time.Time) (ok bool, nextFree time.Time) {
	if b.MaxRetries <= 0 {
		return false, time.Time{}
	}
	var live []time.Time
	for _, t := range stamps {
		if b.inWindow(t, now) {
			live = append(live, t)
		}
	}
	if len(live) < b.MaxRetries {
		return true, now
	}
	slices.SortFunc(live, func(a, b time.Time) int { return a.Compare(b) })
	// len(live)-MaxRetries+1 stamps must leave; the last of them to leave
	// is at index len(live)-MaxRetries.
	return false, live[len(live)-b.MaxRetries].Add(b.Window)
}

// Prune returns a new slice holding only the stamps inside the window
// ending at now, in their original order, so the stored window never grows
// without bound.
func (b Budget) Prune(stamps []time.Time, now time.Time) []time.Time {
	out := make([]time.Time, 0, len(stamps))
	for _, t := range stamps {
		if b.inWindow(t, now) {
			out = append(out, t)
		}
	}
	return out
}

// Level is one budget of a chain with its grant stamps: a budget, then its
// parent, and so on up to the root (SPEC §11, nested budgets).
type Level struct {
	Budget Budget
	Stamps []time.Time
}

// ChainDecision is the answer of AllowChain.
type ChainDecision struct {
	OK bool
	// Refused is the index of the level that decides a refusal: the first
	// refusing level that fails (on_exhausted "fail", or a budget that
	// never frees), else the refusing level that frees last. -1 when OK.
	Refused int
	// Fail is set when the refusal cannot be waited out.
	Fail bool
	// NextFree is when every refusing level has freed a token (not Fail).
	NextFree time.Time
}

// AllowChain reports whether one more retry may take a token at now from
// every level of a chain (a budget and its ancestors): it may only if
// every level allows it. A refusal is decided by the refusing levels: it
// fails when one of them says "fail" (or never frees), and otherwise waits
// until the last of them frees a token.
func AllowChain(levels []Level, now time.Time) ChainDecision {
	d := ChainDecision{OK: true, Refused: -1}
	for i, l := range levels {
		ok, next := l.Budget.Allow(l.Stamps, now)
		if ok {
			continue
		}
		fails := l.Budget.OnExhausted == "fail" || next.IsZero()
		switch {
		case d.OK:
			d = ChainDecision{Refused: i, Fail: fails, NextFree: next}
		case fails && !d.Fail:
			d.Refused, d.Fail = i, true
		case !d.Fail && next.After(d.NextFree):
			d.Refused, d.NextFree = i, next
		}
	}
	if d.Fail {
		d.NextFree = time.Time{}
	}
	return d
}
