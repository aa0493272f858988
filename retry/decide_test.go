package retry

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	pol := Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: 8 * time.Second, MaximumAttempts: 5, HonorRetryAfter: true}
	rule := func(mod func(*Rule)) []Rule {
		r := Rule{Policy: pol}
		mod(&r)
		return []Rule{r}
	}
	plain := []Rule{{Policy: pol}}
	errBoom := errors.New("boom")
	var gotAttempt int
	var gotElapsed time.Duration

	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "retry with policy delay",
			in:   Input{Rules: plain, Failure: Failure{Type: "http:503"}, Attempt: 2, RuleCounts: []int{1}, FirstStart: t0, Now: t0.Add(3 * time.Second)},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{2}, Delay: 2 * time.Second, Source: SourcePolicy},
		},
		{
			name: "flagged non-retryable",
			in:   Input{Rules: plain, Failure: Failure{Type: "x", NonRetryable: true}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: -1, RuleCounts: []int{0}, Reason: ReasonNonRetryable},
		},
		{
			name: "no rules gives one attempt",
			in:   Input{Failure: Failure{Type: "exit:1"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: -1, RuleCounts: []int{}, Reason: ReasonMaxAttempts},
		},
		{
			name: "no rule matches",
			in:   Input{Rules: rule(func(r *Rule) { r.On = []string{"http:429"} }), Failure: Failure{Type: "http:503"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: -1, RuleCounts: []int{0}, Reason: ReasonNonRetryable},
		},
		{
			name: "non_retryable_errors pattern",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.NonRetryable = []string{"CardDeclined", "http:4*"} }), Failure: Failure{Type: "http:404"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonNonRetryable},
		},
		{
			name: "retryable_errors unmatched",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.Retryable = []string{"http:5*"} }), Failure: Failure{Type: "exit:1"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonNonRetryable},
		},
		{
			name: "exec:not_found is not retried by default",
			in:   Input{Rules: plain, Failure: Failure{Type: "exec:not_found"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonNonRetryable},
		},
		{
			name: "exec:not_found retried when retryable_errors names it",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.Retryable = []string{"exec:not_found"} }), Failure: Failure{Type: "exec:not_found"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1}, Delay: time.Second, Source: SourcePolicy},
		},
		{
			name: "exec:not_found retried by a rule on it",
			in:   Input{Rules: rule(func(r *Rule) { r.On = []string{"exec:*"} }), Failure: Failure{Type: "exec:not_found"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1}, Delay: time.Second, Source: SourcePolicy},
		},
		{
			name: "retryable_errors matched",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.Retryable = []string{"http:5*"} }), Failure: Failure{Type: "http:502"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1}, Delay: time.Second, Source: SourcePolicy},
		},
		{
			name: "maximum attempts reached",
			in:   Input{Rules: plain, Failure: Failure{Type: "http:503"}, Attempt: 5, RuleCounts: []int{4}, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{5}, Reason: ReasonMaxAttempts},
		},
		{
			name: "last attempt before the maximum still retries",
			in:   Input{Rules: plain, Failure: Failure{Type: "http:503"}, Attempt: 4, RuleCounts: []int{3}, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{4}, Delay: 8 * time.Second, Source: SourcePolicy},
		},
		{
			name: "unlimited attempts",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.MaximumAttempts = 0 }), Failure: Failure{Type: "x"}, Attempt: 1000, RuleCounts: []int{999}, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1000}, Delay: 8 * time.Second, Source: SourcePolicy},
		},
		{
			name: "retry-after honoured",
			in:   Input{Rules: plain, Failure: Failure{Type: "http:429", RetryAfter: 30 * time.Second, HasRetryAfter: true}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1}, Delay: 30 * time.Second, Source: SourceServer},
		},
		{
			name: "zero retry-after honoured",
			in:   Input{Rules: plain, Failure: Failure{Type: "http:429", HasRetryAfter: true}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1}, Delay: 0, Source: SourceServer},
		},
		{
			name: "retry-after ignored when not honoured",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.HonorRetryAfter = false }), Failure: Failure{Type: "http:429", RetryAfter: 30 * time.Second, HasRetryAfter: true}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{1}, Delay: time.Second, Source: SourcePolicy},
		},
		{
			name: "expired: next start at the deadline",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.Expiration = 10 * time.Second }), Failure: Failure{Type: "x"}, Attempt: 2, RuleCounts: []int{1}, FirstStart: t0, Now: t0.Add(8 * time.Second)},
			want: Decision{Rule: 0, RuleCounts: []int{2}, Reason: ReasonExpired},
		},
		{
			name: "not expired: next start just before the deadline",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.Expiration = 10 * time.Second }), Failure: Failure{Type: "x"}, Attempt: 2, RuleCounts: []int{1}, FirstStart: t0, Now: t0.Add(8*time.Second - 1)},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{2}, Delay: 2 * time.Second, Source: SourcePolicy},
		},
		{
			name: "expired by a server delay",
			in:   Input{Rules: rule(func(r *Rule) { r.Policy.Expiration = time.Minute }), Failure: Failure{Type: "http:429", RetryAfter: time.Hour, HasRetryAfter: true}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonExpired},
		},
		{
			name: "retry_if true",
			in: Input{Rules: rule(func(r *Rule) {
				r.RetryIf = func(f Failure, attempt int, elapsed time.Duration) (bool, error) {
					gotAttempt, gotElapsed = attempt, elapsed
					return f.Type != "Fraud", nil
				}
			}), Failure: Failure{Type: "http:503"}, Attempt: 3, RuleCounts: []int{2}, FirstStart: t0, Now: t0.Add(7 * time.Second)},
			want: Decision{Retry: true, Rule: 0, RuleCounts: []int{3}, Delay: 4 * time.Second, Source: SourcePolicy},
		},
		{
			name: "retry_if false",
			in: Input{Rules: rule(func(r *Rule) {
				r.RetryIf = func(f Failure, _ int, _ time.Duration) (bool, error) { return f.Type != "Fraud", nil }
			}), Failure: Failure{Type: "Fraud"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonRetryIf},
		},
		{
			name: "retry_if error",
			in: Input{Rules: rule(func(r *Rule) {
				r.RetryIf = func(Failure, int, time.Duration) (bool, error) { return true, errBoom }
			}), Failure: Failure{Type: "x"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonRetryIf, Err: errBoom},
		},
		{
			name: "max attempts checked before retry_if",
			in: Input{Rules: rule(func(r *Rule) {
				r.Policy.MaximumAttempts = 1
				r.RetryIf = func(Failure, int, time.Duration) (bool, error) { panic("retry_if must not run") }
			}), Failure: Failure{Type: "x"}, Attempt: 1, FirstStart: t0, Now: t0},
			want: Decision{Rule: 0, RuleCounts: []int{1}, Reason: ReasonMaxAttempts},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.in.RuleCounts)
			got := Decide(tt.in)
			assertDecision(t, got, tt.want)
			if !slices.Equal(tt.in.RuleCounts, before) {
				t.Errorf("Decide modified its input RuleCounts: %v -> %v", before, tt.in.RuleCounts)
			}
		})
	}
	if gotAttempt != 3 || gotElapsed != 7*time.Second {
		t.Errorf("retry_if saw attempt %d elapsed %v, want 3 and 7s", gotAttempt, gotElapsed)
	}
}

func assertDecision(t *testing.T, got, want Decision) {
	t.Helper()
	if got.Retry != want.Retry || got.Rule != want.Rule || got.Delay != want.Delay ||
		got.Source != want.Source || got.Reason != want.Reason || !errors.Is(got.Err, want.Err) ||
		!slices.Equal(got.RuleCounts, want.RuleCounts) {
		t.Errorf("Decide =\n  %+v\nwant\n  %+v", got, want)
	}
}

// TestDecideOrderedRules replays a sequence of 429s and 503s through two
// rules and checks each rule keeps its own count and schedule.
func TestDecideOrderedRules(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rules := []Rule{
		{On: []string{"http:429"}, Policy: Policy{Backoff: Fixed, InitialInterval: 5 * time.Second, MaximumInterval: 5 * time.Second, MaximumAttempts: 20}},
		{Policy: Policy{Backoff: Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: 8 * time.Second, MaximumAttempts: 3}},
	}
	steps := []struct {
		typ    string
		rule   int
		retry  bool
		delay  time.Duration
		reason string
		counts []int
	}{
		{"http:503", 1, true, time.Second, "", []int{0, 1}},
		{"http:429", 0, true, 5 * time.Second, "", []int{1, 1}},
		{"http:429", 0, true, 5 * time.Second, "", []int{2, 1}},
		{"http:503", 1, true, 2 * time.Second, "", []int{2, 2}},
		{"http:429", 0, true, 5 * time.Second, "", []int{3, 2}},
		{"http:503", 1, false, 0, ReasonMaxAttempts, []int{3, 3}},
	}
	var counts []int // starts shorter than rules: missing counts are 0
	now := t0
	for i, s := range steps {
		d := Decide(Input{Rules: rules, Failure: Failure{Type: s.typ}, Attempt: i + 1, RuleCounts: counts, FirstStart: t0, Now: now})
		if d.Rule != s.rule || d.Retry != s.retry || d.Delay != s.delay || d.Reason != s.reason || !slices.Equal(d.RuleCounts, s.counts) {
			t.Fatalf("step %d (%s): got %+v, want rule %d retry %v delay %v reason %q counts %v",
				i+1, s.typ, d, s.rule, s.retry, s.delay, s.reason, s.counts)
		}
		counts = d.RuleCounts
		now = now.Add(d.Delay)
	}
}

// TestDecideCapsRequestedDelay: a delay the activity asks for is honoured up
// to maximum_retry_after (default 1h), and the decision says when it was cut.
func TestDecideCapsRequestedDelay(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	const centuries = time.Duration(9223372036) * time.Second // Retry-After: 9223372036
	pol := func(max, exp time.Duration) []Rule {
		return []Rule{{Policy: Policy{Backoff: Fixed, InitialInterval: time.Second, MaximumInterval: time.Second,
			HonorRetryAfter: true, MaximumRetryAfter: max, Expiration: exp}}}
	}
	tests := []struct {
		name      string
		rules     []Rule
		asked     time.Duration
		wantRetry bool
		wantDelay time.Duration
		wantCap   bool
		reason    string
	}{
		{"292 years capped at the default hour", pol(0, 0), centuries, true, time.Hour, true, ""},
		{"capped at maximum_retry_after", pol(time.Minute, 0), centuries, true, time.Minute, true, ""},
		{"just above the cap", pol(time.Minute, 0), time.Minute + time.Millisecond, true, time.Minute, true, ""},
		{"exactly the cap is not capped", pol(time.Minute, 0), time.Minute, true, time.Minute, false, ""},
		{"below the cap", pol(time.Minute, 0), 30 * time.Second, true, 30 * time.Second, false, ""},
		{"negative means now", pol(time.Minute, 0), -time.Hour, true, 0, false, ""},
		{"capped delay still within expiration", pol(time.Minute, 2*time.Minute), centuries, true, time.Minute, true, ""},
		{"capped delay beyond expiration", pol(time.Minute, 30*time.Second), centuries, false, 0, false, ReasonExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(Input{Rules: tt.rules, Failure: Failure{Type: "http:413", RetryAfter: tt.asked, HasRetryAfter: true},
				Attempt: 1, FirstStart: t0, Now: t0})
			if got.Retry != tt.wantRetry || got.Reason != tt.reason {
				t.Fatalf("Decide = %+v, want retry %v reason %q", got, tt.wantRetry, tt.reason)
			}
			if !got.Retry {
				return
			}
			if got.Delay != tt.wantDelay || got.Capped != tt.wantCap || got.Source != SourceServer {
				t.Errorf("delay %v capped %v source %s, want %v capped %v source server", got.Delay, got.Capped, got.Source, tt.wantDelay, tt.wantCap)
			}
			if want := max(tt.asked, 0); got.Requested != want {
				t.Errorf("Requested = %v, want %v", got.Requested, want)
			}
		})
	}
}
