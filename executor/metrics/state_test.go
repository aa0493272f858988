package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/metrics"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// clock is a settable fake clock for budget windows.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// feed builds events of one instance of workflow "w".
type feed struct {
	m   *metrics.Metrics
	clk *clock
}

func newFeed() *feed {
	clk := &clock{now: t0}
	return &feed{m: metrics.New(metrics.Options{Now: clk.Now, NoRuntime: true}), clk: clk}
}

func (f *feed) at(d time.Duration) { f.clk.now = t0.Add(d) }

func (f *feed) ev(typ event.Type, act string, attempt int, opts ...func(*event.Event)) event.Event {
	e := event.Event{Time: f.clk.now, Type: typ, Workflow: "w", Instance: "w/k", Activity: "activity." + act, Kind: "exec", Attempt: attempt}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func (f *feed) send(evs ...event.Event) { f.m.Observe(evs) }

func (f *feed) scrape(t *testing.T) scrape {
	t.Helper()
	s, _ := parse(t, text(t, f.m))
	return s
}

func kind(k string) func(*event.Event) { return func(e *event.Event) { e.Kind = k } }
func errOf(typ string) func(*event.Event) {
	return func(e *event.Event) { e.Error = &event.Error{Type: typ} }
}
func prev(typ string) func(*event.Event) {
	return func(e *event.Event) { e.PreviousError = &event.Error{Type: typ} }
}
func delay(d time.Duration) func(*event.Event) {
	return func(e *event.Event) { e.DelayMs = event.Ms(d) }
}
func dur(d time.Duration) func(*event.Event) {
	return func(e *event.Event) { e.DurationMs = event.Ms(d) }
}
func fireAt(d time.Duration) func(*event.Event) {
	return func(e *event.Event) { v := t0.Add(d); e.FireAt = &v }
}
func scheduled(d time.Duration) func(*event.Event) {
	return func(e *event.Event) { v := t0.Add(d); e.ScheduledAt = &v }
}
func budget(used, maxRetries int, stamps ...time.Duration) func(*event.Event) {
	return func(e *event.Event) {
		u := &event.BudgetUsage{Name: "api", Used: used, MaxRetries: maxRetries, WindowMs: 10000}
		for _, s := range stamps {
			u.Stamps = append(u.Stamps, t0.Add(s))
		}
		e.Budget = u
	}
}

func expect(t *testing.T, when string, got scrape, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		k = key(k)
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: %s = %v (present %v), want %v", when, k, g, ok, v)
		}
	}
}

// TestGaugesWhileRunning: running attempts and pending timers follow the
// run; a budget's usage decays as its grants leave the window, between
// events, at scrape time.
func TestGaugesWhileRunning(t *testing.T) {
	f := newFeed()
	f.send(event.Event{Time: t0, Type: event.Plan, Workflow: "w", Instance: "w/k", Activities: []event.ActivityInfo{
		{Activity: "activity.a", Action: "run"}, {Activity: "activity.b", Action: "run"}, {Activity: "activity.s", Action: "run"},
		{Activity: "activity.old", Action: "unchanged"},
	}})
	expect(t, "after the plan", f.scrape(t), map[string]float64{
		"wf_attempts_total{workflow=w,activity=activity.a,outcome=succeeded}": 0,
		"wf_running_attempts{}": 0, "wf_pending_timers{}": 0,
	})
	if _, ok := f.scrape(t)[key("wf_attempts_total{workflow=w,activity=activity.old,outcome=succeeded}")]; ok {
		t.Error("an unchanged activity got series")
	}

	f.send(
		f.ev(event.AttemptStarted, "a", 1, budget(0, 2)),
		f.ev(event.AttemptStarted, "s", 1, kind("sleep"), fireAt(10*time.Second)),
		f.ev(event.AttemptStarted, "b", 1, budget(0, 2)),
	)
	expect(t, "three started", f.scrape(t), map[string]float64{
		"wf_running_attempts{}": 2, "wf_pending_timers{}": 1,
		"wf_budget_usage_ratio{budget=api}": 0,
	})

	f.at(time.Second)
	f.send(
		f.ev(event.AttemptFailed, "a", 1, errOf("http:503"), dur(time.Second), budget(1, 2, time.Second)),
		f.ev(event.RetryScheduled, "a", 2, delay(time.Second), fireAt(2*time.Second), budget(1, 2, time.Second)),
	)
	expect(t, "a waits", f.scrape(t), map[string]float64{
		"wf_running_attempts{}": 1, "wf_pending_timers{}": 2,
		"wf_budget_usage_ratio{budget=api}": 0.5, "wf_budget_retries_in_window{budget=api}": 1,
		"wf_retries_total{workflow=w,activity=activity.a,error_type=http:503}": 0,
		"wf_retry_delay_seconds_count{workflow=w,activity=activity.a}":         1,
	})

	f.at(2*time.Second + 50*time.Millisecond)
	f.send(f.ev(event.AttemptStarted, "a", 2, prev("http:503"), scheduled(2*time.Second), budget(1, 2, time.Second)))
	expect(t, "a retried 50ms late", f.scrape(t), map[string]float64{
		"wf_running_attempts{}": 2, "wf_pending_timers{}": 1,
		"wf_retries_total{workflow=w,activity=activity.a,error_type=http:503}": 1,
		"wf_timer_lateness_seconds_count{}":                                    1,
		"wf_timer_lateness_seconds_bucket{le=0.05}":                            1,
		"wf_timer_lateness_seconds_bucket{le=0.025}":                           0,
	})

	f.at(3 * time.Second)
	f.send(
		f.ev(event.AttemptFailed, "b", 1, errOf("http:503"), dur(3*time.Second), budget(2, 2, time.Second, 3*time.Second)),
		f.ev(event.BudgetWait, "b", 2, delay(8*time.Second), fireAt(11*time.Second), budget(2, 2, time.Second, 3*time.Second)),
		f.ev(event.AttemptSucceeded, "a", 2, dur(950*time.Millisecond), budget(2, 2, time.Second, 3*time.Second)),
		f.ev(event.ActivitySucceeded, "a", 2, budget(2, 2, time.Second, 3*time.Second)),
	)
	expect(t, "b waits for the budget", f.scrape(t), map[string]float64{
		"wf_running_attempts{}": 0, "wf_pending_timers{}": 2,
		"wf_budget_usage_ratio{budget=api}":                                            1,
		"wf_budget_exhausted_total{budget=api,on_exhausted=wait}":                      1,
		"wf_attempts_total{workflow=w,activity=activity.a,outcome=succeeded}":          1,
		"wf_attempts_total{workflow=w,activity=activity.a,outcome=failed}":             1,
		"wf_activities_total{workflow=w,activity=activity.a,status=succeeded,reason=}": 1,
		"wf_attempt_duration_seconds_count{workflow=w,activity=activity.a}":            2,
		"wf_attempt_duration_seconds_bucket{workflow=w,activity=activity.a,le=1}":      2,
		"wf_retry_delay_seconds_bucket{workflow=w,activity=activity.b,le=15}":          1,
		"wf_retry_delay_seconds_bucket{workflow=w,activity=activity.b,le=5}":           0,
	})

	// No event: the grant of 1s leaves the window at 11s, that of 3s at 13s.
	f.at(11500 * time.Millisecond)
	expect(t, "first grant expired", f.scrape(t), map[string]float64{
		"wf_budget_usage_ratio{budget=api}": 0.5, "wf_budget_retries_in_window{budget=api}": 1,
	})
	f.at(13 * time.Second)
	expect(t, "both expired", f.scrape(t), map[string]float64{
		"wf_budget_usage_ratio{budget=api}": 0, "wf_budget_retries_in_window{budget=api}": 0,
	})

	// The sleep ends 200ms after its wake-up time.
	f.at(10200 * time.Millisecond)
	f.send(
		f.ev(event.AttemptSucceeded, "s", 1, kind("sleep"), dur(10200*time.Millisecond)),
		f.ev(event.ActivitySucceeded, "s", 1, kind("sleep")),
	)
	expect(t, "sleep done", f.scrape(t), map[string]float64{
		"wf_pending_timers{}":                       1,
		"wf_timer_lateness_seconds_count{}":         2,
		"wf_timer_lateness_seconds_bucket{le=0.25}": 2,
		"wf_timer_lateness_seconds_bucket{le=0.1}":  1,
	})

	// b's budget frees; a budget failure ends it.
	f.at(14 * time.Second)
	f.send(f.ev(event.ActivityFailed, "b", 1, budget(2, 2), func(e *event.Event) { e.Reason = event.ReasonBudgetExhausted }))
	expect(t, "b failed", f.scrape(t), map[string]float64{
		"wf_pending_timers{}": 0, "wf_running_attempts{}": 0,
		"wf_budget_exhausted_total{budget=api,on_exhausted=fail}":                                   1,
		"wf_activities_total{workflow=w,activity=activity.b,status=failed,reason=budget_exhausted}": 1,
		// Without stamps (an event from elsewhere), the last count stands.
		"wf_budget_retries_in_window{budget=api}": 2,
	})
}

// TestResumeCounts: a resumed run counts an attempt a crash interrupted
// without having seen it start, never drives a gauge below zero, and does
// not count the downtime of an overdue timer as lateness.
func TestResumeCounts(t *testing.T) {
	f := newFeed()
	f.at(time.Hour)
	f.send(
		f.ev(event.TimerRecovered, "x", 3, fireAt(time.Minute)), // overdue by 59 minutes
		f.ev(event.TimerRecovered, "z", 2, fireAt(time.Hour+time.Second)),
		f.ev(event.AttemptFailed, "y", 1, errOf("interrupted"), dur(50*time.Minute)),
		f.ev(event.RetryScheduled, "y", 2, delay(0), fireAt(time.Hour)),
	)
	expect(t, "recovered", f.scrape(t), map[string]float64{
		"wf_pending_timers{}": 3, "wf_running_attempts{}": 0,
		"wf_attempts_total{workflow=w,activity=activity.y,outcome=interrupted}": 1,
	})
	if _, ok := f.scrape(t)[key("wf_attempt_duration_seconds_count{workflow=w,activity=activity.y}")]; ok {
		t.Error("an interrupted attempt was timed")
	}
	f.send(
		f.ev(event.AttemptStarted, "x", 3, prev("exit:1"), scheduled(time.Minute)),
		f.ev(event.AttemptStarted, "y", 2, prev("interrupted"), scheduled(time.Hour)),
	)
	f.at(time.Hour + 1100*time.Millisecond)
	f.send(f.ev(event.AttemptStarted, "z", 2, prev("exit:1"), scheduled(time.Hour+time.Second)))
	expect(t, "resumed", f.scrape(t), map[string]float64{
		"wf_pending_timers{}": 0, "wf_running_attempts{}": 3,
		"wf_retries_total{workflow=w,activity=activity.y,error_type=interrupted}": 1,
		"wf_retries_total{workflow=w,activity=activity.x,error_type=exit:1}":      1,
		// y fired on time and z 100ms late; x's hour of downtime is not lateness.
		"wf_timer_lateness_seconds_count{}":        2,
		"wf_timer_lateness_seconds_bucket{le=0.1}": 2,
	})
}

// TestErrorTypesBounded: an activity inventing a new error type on every
// failure cannot grow the scrape without bound; nothing is lost.
func TestErrorTypesBounded(t *testing.T) {
	f := newFeed()
	for i := 1; i <= 200; i++ {
		f.send(
			f.ev(event.AttemptFailed, "a", i, errOf(fmt.Sprintf("E%d", i))),
			f.ev(event.AttemptStarted, "a", i+1, prev(fmt.Sprintf("E%d", i))),
		)
	}
	var series int
	var sum float64
	for k, v := range f.scrape(t) {
		if strings.HasPrefix(k, "wf_retries_total{") {
			series++
			sum += v
		}
	}
	if series != 64 || sum != 200 {
		t.Errorf("%d error_type series summing to %v, want 64 summing to 200", series, sum)
	}
	expect(t, "overflow", f.scrape(t), map[string]float64{
		"wf_retries_total{workflow=w,activity=activity.a,error_type=E63}":   1,
		"wf_retries_total{workflow=w,activity=activity.a,error_type=other}": 137,
	})
}

// TestLabelEscaping: fan-out addresses carry quotes, error messages can
// carry anything; the text stays parseable and the values round-trip.
func TestLabelEscaping(t *testing.T) {
	f := newFeed()
	act := `fan["eu\west"]`
	f.send(
		f.ev(event.AttemptFailed, act, 1, errOf("odd\"type\nwith\\all"), dur(time.Millisecond)),
		f.ev(event.AttemptStarted, act, 2, prev("odd\"type\nwith\\all")),
		f.ev(event.AttemptFailed, "bad", 1, errOf("x\xffy")),
	)
	got := f.scrape(t)
	expect(t, "escaped", got, map[string]float64{
		"wf_retries_total{workflow=w,activity=activity." + act + ",error_type=odd\"type\nwith\\all}": 1,
		"wf_retries_total{workflow=w,activity=activity.bad,error_type=x\uFFFDy}":                     0,
	})
}

// TestCircuitState: the breaker gauge follows circuit_* events.
func TestCircuitState(t *testing.T) {
	f := newFeed()
	for _, step := range []struct {
		typ  event.Type
		want float64
	}{{event.CircuitOpened, 2}, {event.CircuitHalfOpen, 1}, {event.CircuitClosed, 0}, {event.CircuitOpened, 2}} {
		f.send(event.Event{Time: t0, Type: step.typ, Breaker: "payment_api"})
		expect(t, string(step.typ), f.scrape(t), map[string]float64{"wf_circuit_state{breaker=payment_api}": step.want})
	}
}

// TestScrapeBoundedByActivities: the number of series depends on the
// activities (and their error types), not on how many attempts they made.
func TestScrapeBoundedByActivities(t *testing.T) {
	lines := func(attempts int) int {
		m := metrics.New(metrics.Options{NoRuntime: true})
		fill(m, 100, attempts)
		return strings.Count(string(text(t, m)), "\n")
	}
	few, many := lines(2), lines(300)
	if few != many || few == 0 {
		t.Errorf("100 activities: %d lines with 2 attempts each, %d with 300", few, many)
	}
}

// TestCircuitStateFromPlan: a breaker has its series from the plan on, in
// the state it was loaded in.
func TestCircuitStateFromPlan(t *testing.T) {
	f := newFeed()
	f.send(event.Event{Time: t0, Type: event.Plan, Workflow: "w", Instance: "w/k",
		Circuits: []event.CircuitInfo{{Name: "api", State: "open"}, {Name: "db", State: "closed"}}})
	expect(t, "plan", f.scrape(t), map[string]float64{"wf_circuit_state{breaker=api}": 2, "wf_circuit_state{breaker=db}": 0})
}

// TestNestedBudgetGauges: every level of a nested budget has its gauges,
// and a refusal counts against the level that refused.
func TestNestedBudgetGauges(t *testing.T) {
	f := newFeed()
	usage := &event.BudgetUsage{Name: "team", Used: 1, MaxRetries: 4, WindowMs: 60000,
		Parent: &event.BudgetUsage{Name: "org", Used: 2, MaxRetries: 2, WindowMs: 60000}}
	withUsage := func(e *event.Event) { e.Budget = usage }
	f.send(f.ev(event.AttemptFailed, "a", 1, errOf("exit:1"), withUsage), f.ev(event.BudgetWait, "a", 2, withUsage, delay(time.Minute)))
	expect(t, "levels", f.scrape(t), map[string]float64{
		"wf_budget_usage_ratio{budget=team}":                      0.25,
		"wf_budget_usage_ratio{budget=org}":                       1,
		"wf_budget_retries_in_window{budget=org}":                 2,
		"wf_budget_exhausted_total{budget=org,on_exhausted=wait}": 1,
		"wf_budget_retries_in_window{budget=team}":                1,
	})
	if got := f.scrape(t)["wf_budget_exhausted_total{budget=team,on_exhausted=wait}"]; got != 0 {
		t.Errorf("the refusal was counted against team: %v", got)
	}
}
