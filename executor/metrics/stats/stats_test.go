package stats

import (
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		ds       []time.Duration
		q        float64
		want     time.Duration
		describe string
	}{
		{nil, 0.5, 0, "none"},
		{ms(7), 0.5, 7 * time.Millisecond, "one"},
		{ms(7), 0.99, 7 * time.Millisecond, "one, p99"},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond, "even count: the lower middle"},
		{ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond, "odd count: the middle"},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond, "p99 of 10 is the max"},
	}
	for _, tt := range tests {
		if got := percentile(tt.ds, tt.q); got != tt.want {
			t.Errorf("%s: percentile(%v, %v) = %v, want %v", tt.describe, tt.ds, tt.q, got, tt.want)
		}
	}
}

// TestWaitsStayInTheirGeneration: the gap between the last attempt of one
// generation and the first of the next (a re-run days later) is no retry
// wait; a retry still waiting counts up to now, by its timer's kind.
func TestWaitsStayInTheirGeneration(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	att := func(gen, n int, start, end time.Duration, src string) *record.Attempt {
		a := &record.Attempt{Workflow: "w", Instance: "k", Activity: "a", Generation: gen, Number: n,
			Start: t0.Add(start), End: t0.Add(end), Outcome: record.OutcomeFailed, Error: &record.Error{Type: "exit:1"}}
		if src != "" {
			a.HasWait, a.WaitSource = true, src
		}
		return a
	}
	b := NewBuilder(t0.Add(100 * time.Hour))
	b.Add(Input{
		Activities: map[string]*record.Activity{"a": {Name: "a", Generation: 2, Status: record.StatusWaiting,
			Timer: &record.Timer{Kind: record.TimerBudget, Attempt: 3}}},
		Attempts: []*record.Attempt{
			att(1, 1, 0, time.Second, "policy"),
			att(1, 2, 3*time.Second, 4*time.Second, ""), // failed for good
			att(2, 1, 48*time.Hour, 48*time.Hour+time.Second, "policy"),
			att(2, 2, 48*time.Hour+5*time.Second, 99*time.Hour, "budget"), // waiting since
		},
	})
	res := b.Result()
	if len(res) != 1 {
		t.Fatalf("%+v", res)
	}
	a := res[0]
	if a.RetryWait != 2*time.Second+4*time.Second || a.BudgetWait != time.Hour {
		t.Errorf("retry wait %v, budget wait %v; want 6s and 1h", a.RetryWait, a.BudgetWait)
	}
	if a.Attempts != 4 || a.Retries != 2 || a.Instances != 1 || a.ErrorTypes[0] != (ErrorCount{"exit:1", 4}) {
		t.Errorf("%+v", a)
	}
}
