package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// The attempt column never shows more attempts than the limit and never
// changes the limit without saying which rule sets it. Attempts are
// numbered across all of an activity's rules, but each rule counts only
// the failures it matched (SPEC §3), and an interrupted attempt is
// numbered yet counted by no rule. So the column shows the attempt number
// and, beside it, what the speaking rule has used of its limit:
//
//	attempt 3/5                       one rule, number and count agree
//	attempt 4 · 3/5 · 1 interrupted   one rule, an attempt was interrupted
//	attempt 6 · http:429 rule 2/10    several rules: the 429 rule speaks
//	attempt 1                         several rules, none has spoken yet

// attemptLabels are the attempt column's forms, longest first.
func (r *row) attemptLabels() []string {
	n := r.attempt
	if n == 0 {
		return []string{""}
	}
	lim := "∞"
	if r.maxAttempts > 0 {
		lim = fmt.Sprint(r.maxAttempts)
	}
	if r.rule.Rules == 0 {
		// No rule facts: no retry block (one attempt), or events from an
		// older wf. Attempts before the only one were interrupted.
		switch {
		case r.maxAttempts == 1 && n > 1:
			return withInterrupted(fmt.Sprintf("attempt %d · 1/1", n), n-1)
		case r.maxAttempts > 0 && n > r.maxAttempts:
			return []string{fmt.Sprintf("attempt %d", n)}
		}
		return []string{fmt.Sprintf("attempt %d/%s", n, lim)}
	}
	if r.rule.Index == 0 {
		return withInterrupted(fmt.Sprintf("attempt %d", n), r.interrupted())
	}
	k := r.rule.Counted
	if r.currentUncounted() {
		k++
	}
	if r.maxAttempts > 0 {
		k = min(k, r.maxAttempts)
	}
	i := r.interrupted()
	if r.rule.Rules == 1 {
		if k == n && i == 0 {
			return []string{fmt.Sprintf("attempt %d/%s", n, lim)}
		}
		return withInterrupted(fmt.Sprintf("attempt %d · %d/%s", n, k, lim), i)
	}
	full, short := ruleLabel(r.rule.On, false), ruleLabel(r.rule.On, true)
	return withInterrupted(fmt.Sprintf("attempt %d · %s rule %d/%s", n, full, k, lim), i,
		fmt.Sprintf("attempt %d · %s rule %d/%s", n, short, k, lim),
		fmt.Sprintf("attempt %d · %s %d/%s", n, short, k, lim),
		fmt.Sprintf("%d · %s %d/%s", n, short, k, lim))
}

// withInterrupted appends the interrupted count to the longest form when
// there is one; the shorter forms leave it to the row's detail ("running
// 1.2s · after interrupted") and the history.
func withInterrupted(label string, interrupted int, shorter ...string) []string {
	forms := append([]string{label}, shorter...)
	if interrupted == 0 {
		return forms
	}
	return append([]string{fmt.Sprintf("%s · %d interrupted", label, interrupted)}, forms...)
}

// attemptText is the attempt column's longest form.
func (r *row) attemptText() string { return r.attemptLabels()[0] }

// currentUncounted says whether the current or last attempt is a real one
// that no rule has counted (yet): one in progress, one that succeeded, or
// a failure no rule matched.
func (r *row) currentUncounted() bool {
	switch r.st {
	case stRunning, stSleeping, stSucceeded:
		return true
	case stFailed, stAttemptFailed:
		return r.lastUncounted
	}
	return false
}

// interrupted is how many ended attempts no rule counted although they
// failed: interrupted ones, which SPEC §6 never counts against a limit.
func (r *row) interrupted() int {
	ended := r.attempt
	switch r.st {
	case stRunning, stSleeping, stSucceeded:
		ended--
	case stFailed, stAttemptFailed:
		if r.lastUncounted {
			ended--
		}
	case stPending, stSkipped, stUnchanged:
		return 0
	}
	return max(0, ended-r.rule.CountedAll)
}

// ruleLabel names a rule by its on patterns, as the configuration does;
// short drops the "http:" of status patterns and calls the catch-all
// "other".
func ruleLabel(on []string, short bool) string {
	if len(on) == 0 {
		if short {
			return "other"
		}
		return "catch-all"
	}
	parts := on
	if short {
		parts = make([]string, len(on))
		for i, p := range on {
			parts[i] = strings.TrimPrefix(p, "http:")
		}
	}
	s := strings.Join(parts, ",")
	if width(s) > 16 {
		s = ansi.Truncate(s, 16, "…")
	}
	return s
}
