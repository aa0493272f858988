package temporal

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// The retry scenarios TestParity runs on both engines, and the checks of
// their runs.

type parityCase struct {
	name string
	hcl  string
	sc   script
	par  int
	// want checks the local run, so that a case proves something beyond
	// "both engines agree".
	want func(t *testing.T, r run)
}

// hclLines expands one-line blocks written "{ a = 1 ; b = 2 }" into the
// one-attribute-per-line form HCL requires.
func hclLines(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, " ; ") {
			line = strings.Replace(line, "{ ", "{\n", 1)
			line = strings.ReplaceAll(line, " ; ", "\n")
			line = line[:strings.LastIndex(line, " }")] + "\n}"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func one(body string) string {
	return `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["true"] }
` + body + `
  }
}
`
}

func waits(r run, activity string) []time.Duration {
	var out []time.Duration
	for _, a := range r.state.Attempts {
		if a.Activity == activity && a.HasWait {
			out = append(out, a.Wait)
		}
	}
	return out
}

func wantWaits(want ...time.Duration) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		if got := waits(r, "a"); !slices.Equal(got, want) {
			t.Errorf("waits of activity.a = %v, want %v", got, want)
		}
	}
}

func wantEnd(status record.Status, reason string, attempts int) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		a := r.state.Activities["a"]
		if a.Status != status || a.FailReason != reason || a.Attempts != attempts {
			t.Errorf("activity.a = %s reason %q after %d attempts, want %s %q after %d", a.Status, a.FailReason, a.Attempts, status, reason, attempts)
		}
	}
}

func all(fs ...func(*testing.T, run)) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		for _, f := range fs {
			f(t, r)
		}
	}
}

// jittered checks that waits vary and stay within [lo, hi].
func jittered(n int, lo, hi time.Duration) func(*testing.T, run) {
	return func(t *testing.T, r run) {
		t.Helper()
		ws := waits(r, "a")
		if len(ws) != n {
			t.Fatalf("waits = %v, want %d of them", ws, n)
		}
		distinct := map[time.Duration]bool{}
		for _, w := range ws {
			distinct[w] = true
			if w < lo || w > hi {
				t.Errorf("wait %s outside [%s, %s]", w, lo, hi)
			}
		}
		if len(distinct) < 2 {
			t.Errorf("jittered waits are all equal: %v", ws)
		}
	}
}

var parityCases = []parityCase{
	{
		name: "exponential",
		hcl:  one(`retry { initial_interval = "1s" ; backoff_coefficient = 2 ; maximum_interval = "5s" ; maximum_attempts = 6 }`),
		sc:   script{"a": fails("exit:1", 4)},
		want: all(wantWaits(time.Second, 2*time.Second, 4*time.Second, 5*time.Second), wantEnd(record.StatusSucceeded, "", 5)),
	},
	{
		name: "linear",
		hcl:  one(`retry { backoff = "linear" ; initial_interval = "2s" ; maximum_attempts = 4 }`),
		sc:   script{"a": fails("exit:1", 9)},
		want: all(wantWaits(2*time.Second, 4*time.Second, 6*time.Second), wantEnd(record.StatusFailed, "max_attempts", 4)),
	},
	{
		name: "fixed",
		hcl:  one(`retry { backoff = "fixed" ; initial_interval = "3s" ; maximum_attempts = 3 }`),
		sc:   script{"a": fails("http:503", 9)},
		want: all(wantWaits(3*time.Second, 3*time.Second), wantEnd(record.StatusFailed, "max_attempts", 3)),
	},
	{
		name: "jitter full",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_interval = "8s" ; maximum_attempts = 6 ; jitter = "full" }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, 0, 8*time.Second),
	},
	{
		name: "jitter equal",
		hcl:  one(`retry { initial_interval = "2s" ; backoff = "fixed" ; maximum_attempts = 6 ; jitter = "equal" }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, time.Second, 2*time.Second),
	},
	{
		name: "jitter decorrelated",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_interval = "20s" ; maximum_attempts = 6 ; jitter = "decorrelated" }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, time.Second, 20*time.Second),
	},
	{
		name: "jitter fraction",
		hcl:  one(`retry { initial_interval = "10s" ; backoff = "fixed" ; maximum_attempts = 6 ; jitter = 0.5 }`),
		sc:   script{"a": fails("exit:1", 5)},
		want: jittered(5, 5*time.Second, 15*time.Second),
	},
	{
		name: "ordered rules",
		hcl: one(`
    retry {
      on = ["http:429"]
      backoff = "fixed"
      initial_interval = "5s"
      maximum_attempts = 3
    }
    retry {
      initial_interval = "1s"
      maximum_attempts = 4
    }`),
		sc:   script{"a": {fail("http:429"), fail("http:503"), fail("http:429"), fail("http:503"), fail("http:429")}},
		want: all(wantWaits(5*time.Second, time.Second, 5*time.Second, 2*time.Second), wantEnd(record.StatusFailed, "max_attempts", 5)),
	},
	{
		name: "retry_if",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 10 ; retry_if = error.type != "Fraud" && attempt < 3 }`),
		sc:   script{"a": fails("exit:1", 9)},
		want: wantEnd(record.StatusFailed, "retry_if", 3),
	},
	{
		name: "retry_if error type",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 10 ; retry_if = error.type != "Fraud" }`),
		sc:   script{"a": {fail("exit:1"), fail("Fraud")}},
		want: wantEnd(record.StatusFailed, "retry_if", 2),
	},
	{
		name: "retry-after",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 3 }`),
		sc:   script{"a": {{typ: "http:429", retryAfter: 7 * time.Second}}},
		want: all(wantWaits(7*time.Second), wantEnd(record.StatusSucceeded, "", 2)),
	},
	{
		name: "budget wait",
		hcl: `
retry_budget "b" {
  max_retries  = 1
  window       = "10s"
  on_exhausted = "wait"
}
` + one(`retry { initial_interval = "1s" ; backoff = "fixed" ; maximum_attempts = 5 ; budget = retry_budget.b }`),
		sc: script{"a": fails("http:503", 3)},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 4)(t, r)
			var sources []string
			for _, a := range r.state.Attempts {
				if a.HasWait {
					sources = append(sources, a.WaitSource)
				}
			}
			if !slices.Contains(sources, "budget") {
				t.Errorf("no retry waited for the budget: %v", sources)
			}
		},
	},
	{
		name: "budget fail",
		hcl: `
retry_budget "b" {
  max_retries  = 1
  window       = "1m"
  on_exhausted = "fail"
}
` + one(`retry { initial_interval = "1s" ; maximum_attempts = 5 ; budget = retry_budget.b }`),
		sc:   script{"a": fails("http:503", 9)},
		want: wantEnd(record.StatusFailed, "budget_exhausted", 2),
	},
	{
		name: "budget nested",
		hcl: `
retry_budget "org" {
  max_retries  = 1
  window       = "10s"
  on_exhausted = "wait"
}
retry_budget "b" {
  max_retries = 5
  window      = "1m"
  parent      = retry_budget.org
}
` + one(`retry { initial_interval = "1s" ; backoff = "fixed" ; maximum_attempts = 5 ; budget = retry_budget.b }`),
		sc: script{"a": fails("http:503", 2)},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 3)(t, r)
			// The second retry waits for the parent, though b has tokens.
			if got := waits(r, "a"); len(got) != 2 || got[0] != time.Second || got[1] < 9*time.Second {
				t.Errorf("waits = %v, want 1s then the parent's window", got)
			}
		},
	},
	{
		name: "circuit breaker",
		hcl: `
circuit_breaker "api" {
  minimum_calls  = 2
  failure_ratio  = 0.5
  window         = "1m"
  break_duration = "10s"
}
` + one(`retry { initial_interval = "1s" ; backoff = "fixed" ; maximum_attempts = 6 ; circuit_breaker = circuit_breaker.api }`),
		sc: script{"a": fails("http:503", 3)},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 4)(t, r)
			var circuit int
			for _, e := range r.events {
				if e.Type == event.CircuitWait {
					circuit++
				}
			}
			// Attempt 2 opens it; retries 3 and 4 wait for the ends of
			// the breaks (attempt 3 is the trial that fails).
			if circuit != 2 {
				t.Errorf("circuit waits = %d, want 2", circuit)
			}
			if a := r.state.Attempts; a[len(a)-1].Start.Sub(a[1].End) < 20*time.Second {
				t.Errorf("the last attempt started %s after the breaker opened, want two breaks", a[len(a)-1].Start.Sub(a[1].End))
			}
		},
	},
	{
		name: "expiration",
		hcl:  one(`retry { backoff = "fixed" ; initial_interval = "2s" ; expiration = "5s" }`),
		sc:   script{"a": fails("exit:1", 99)},
		want: all(wantWaits(2*time.Second, 2*time.Second), wantEnd(record.StatusFailed, "expired", 3)),
	},
	{
		name: "non-retryable pattern",
		hcl:  one(`retry { maximum_attempts = 5 ; non_retryable_errors = ["Card*"] }`),
		sc:   script{"a": {fail("CardDeclined")}},
		want: wantEnd(record.StatusFailed, "non_retryable", 1),
	},
	{
		name: "non-retryable flag",
		hcl:  one(`retry { maximum_attempts = 5 }`),
		sc:   script{"a": {{typ: "Fatal", nonRetryable: true}}},
		want: wantEnd(record.StatusFailed, "non_retryable", 1),
	},
	{
		name: "interrupted",
		hcl:  one(`retry { initial_interval = "1s" ; maximum_attempts = 3 }`),
		sc:   script{"a": {fail("interrupted")}},
		want: func(t *testing.T, r run) {
			wantEnd(record.StatusSucceeded, "", 2)(t, r)
			if got := r.state.Attempts[0]; got.Outcome != record.OutcomeInterrupted || got.IdempotencyKey != r.state.Attempts[1].IdempotencyKey {
				t.Errorf("attempt 1 = %s with key %s, attempt 2 key %s: want interrupted, same key", got.Outcome, got.IdempotencyKey, r.state.Attempts[1].IdempotencyKey)
			}
		},
	},
	{
		name: "graph with parallel jittered failures",
		hcl: `
workflow "w" {
  key = "k"
  activity "a" {
    exec { command = ["true"] }
    retry { initial_interval = "1s" ; maximum_attempts = 5 ; jitter = "full" }
  }
  activity "b" {
    exec { command = ["true"] }
    retry { initial_interval = "1s" ; maximum_attempts = 5 ; jitter = "full" }
  }
  activity "c" {
    exec { command = ["echo", activity.a.stdout] }
    depends_on = [activity.b]
    retry { initial_interval = "1s" ; maximum_attempts = 2 }
  }
  activity "d" {
    sleep { duration = "3s" }
    depends_on = [activity.c]
  }
  activity "e" {
    exec { command = ["true"] }
    depends_on = [activity.d]
  }
}
`,
		sc:  script{"a": fails("exit:1", 3), "b": fails("exit:2", 2), "c": fails("exit:3", 2)},
		par: 2,
		want: func(t *testing.T, r run) {
			if st := r.state.Activities["c"].Status; st != record.StatusFailed {
				t.Errorf("activity.c = %s, want failed", st)
			}
			for _, n := range []string{"d", "e"} {
				if st := r.state.Activities[n].Status; st != record.StatusSkipped {
					t.Errorf("activity.%s = %s, want skipped", n, st)
				}
			}
		},
	},
}
