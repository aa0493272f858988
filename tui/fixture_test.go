package tui

import (
	"fmt"
	"sync"
	"time"

	"github.com/wf-engine/wf/executor/event"
)

// t0 is the fixed start of every scenario, so goldens are stable.
var t0 = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

// fakeClock is an injectable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeController records the operator's commands.
type fakeController struct {
	mu         sync.Mutex
	fired      []string
	detached   int
	interrupts int
}

func (f *fakeController) FireNow(instance, activity string) {
	f.mu.Lock()
	f.fired = append(f.fired, instance+" "+activity)
	f.mu.Unlock()
}

func (f *fakeController) Detach() {
	f.mu.Lock()
	f.detached++
	f.mu.Unlock()
}

func (f *fakeController) detachCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.detached
}

func (f *fakeController) Interrupt() {
	f.mu.Lock()
	f.interrupts++
	f.mu.Unlock()
}

const inst = "order/order-1001"

// scenario builds events for one instance at offsets from t0.
type scenario struct{ evs []event.Event }

func at(d time.Duration) time.Time { return t0.Add(d) }

func (s *scenario) add(off time.Duration, ev event.Event) *scenario {
	ev.Time = at(off)
	ev.Workflow = "order"
	if ev.Instance == "" {
		ev.Instance = inst
	}
	s.evs = append(s.evs, ev)
	return s
}

func plan(acts ...event.ActivityInfo) *scenario {
	s := &scenario{}
	return s.add(0, event.Event{Type: event.Plan, Activities: acts})
}

func act(name, kind string, maxAttempts int) event.ActivityInfo {
	return event.ActivityInfo{Activity: "activity." + name, Kind: kind, Action: "run", MaxAttempts: maxAttempts}
}

func (s *scenario) started(off time.Duration, name string, n int) *scenario {
	return s.add(off, event.Event{Type: event.AttemptStarted, Activity: "activity." + name, Attempt: n})
}

func (s *scenario) failed(off time.Duration, name string, n int, typ, msg string) *scenario {
	return s.add(off, event.Event{Type: event.AttemptFailed, Activity: "activity." + name, Attempt: n,
		Error: &event.Error{Type: typ, Message: msg}})
}

func (s *scenario) retry(off time.Duration, name string, next int, delay time.Duration) *scenario {
	fire := at(off).Add(delay)
	return s.add(off, event.Event{Type: event.RetryScheduled, Activity: "activity." + name, Attempt: next,
		DelayMs: event.Ms(delay), FireAt: &fire, DelaySource: "policy"})
}

func (s *scenario) succeeded(off time.Duration, name string, n int, total time.Duration) *scenario {
	s.add(off, event.Event{Type: event.AttemptSucceeded, Activity: "activity." + name, Attempt: n, DurationMs: event.Ms(time.Second)})
	return s.add(off, event.Event{Type: event.ActivitySucceeded, Activity: "activity." + name, Attempt: n, DurationMs: event.Ms(total)})
}

// flaky is an activity failing with http:503 until it succeeds on attempt
// `until` (or keeps failing when until is 0), for n attempts.
func (s *scenario) flaky(name string, n int) *scenario {
	off := time.Duration(0)
	for i := 1; i <= n; i++ {
		s.started(off, name, i)
		off += 300 * time.Millisecond
		s.failed(off, name, i, "http:503", "service unavailable")
		s.retry(off, name, i+1, time.Duration(i)*time.Second)
		off += time.Duration(i) * time.Second
	}
	return s
}

// allStates is one instance with a row in every state, the clock at t0+10s.
func allStates() []event.Event {
	budget := &event.BudgetUsage{Name: "payment_api", Used: 10, MaxRetries: 10, WindowMs: 60000}
	wake := at(10*time.Second + 4*time.Minute)
	budgetFree := at(13 * time.Second)
	s := plan(
		act("setup", "exec", 1),
		act("validate_order_payload", "exec", 5),
		act("fetch_inventory", "http", 3),
		act("charge_card", "http", 5),
		act("capture", "http", 20),
		act("cool_down", "sleep", 1),
		act("refund", "http", 3),
		act("notify_customer_by_email_and_sms_with_a_very_long_name", "exec", 0),
	)
	s.evs[0].Activities[0].Action = "unchanged"
	s.started(0, "validate_order_payload", 1)
	s.failed(time.Second, "validate_order_payload", 1, "exit:1", "")
	s.retry(time.Second, "validate_order_payload", 2, time.Second)
	s.started(2*time.Second, "validate_order_payload", 2)
	s.failed(2500*time.Millisecond, "validate_order_payload", 2, "exit:1", "")
	s.retry(2500*time.Millisecond, "validate_order_payload", 3, 2*time.Second)
	s.started(4500*time.Millisecond, "validate_order_payload", 3)
	s.failed(5*time.Second, "validate_order_payload", 3, "exit:1", "")
	s.retry(5*time.Second, "validate_order_payload", 4, 2*time.Second)
	s.started(7*time.Second, "validate_order_payload", 4)
	s.succeeded(7300*time.Millisecond, "validate_order_payload", 4, 7300*time.Millisecond)
	s.started(8800*time.Millisecond, "fetch_inventory", 1)
	s.started(1*time.Second, "charge_card", 1)
	s.failed(2*time.Second, "charge_card", 1, "http:503", "")
	s.retry(2*time.Second, "charge_card", 2, time.Second)
	s.started(3*time.Second, "charge_card", 2)
	s.failed(4*time.Second, "charge_card", 2, "http:503", "")
	s.retry(7600*time.Millisecond, "charge_card", 3, 4800*time.Millisecond)
	s.started(2*time.Second, "capture", 1)
	s.failed(3*time.Second, "capture", 1, "http:429", "slow down")
	s.add(3*time.Second, event.Event{Type: event.BudgetWait, Activity: "activity.capture", Attempt: 2,
		FireAt: &budgetFree, Budget: budget})
	s.add(10*time.Second, event.Event{Type: event.AttemptStarted, Activity: "activity.cool_down", Kind: "sleep", Attempt: 1, FireAt: &wake})
	s.started(1*time.Second, "refund", 1)
	s.add(1500*time.Millisecond, event.Event{Type: event.AttemptFailed, Activity: "activity.refund", Attempt: 1,
		Error: &event.Error{Type: "CardDeclined", Message: "card declined", NonRetryable: true}})
	s.add(1500*time.Millisecond, event.Event{Type: event.ActivityFailed, Activity: "activity.refund", Attempt: 1,
		Reason: event.ReasonNonRetryable, Error: &event.Error{Type: "CardDeclined", Message: "card declined", NonRetryable: true}})
	s.add(1500*time.Millisecond, event.Event{Type: event.ActivitySkipped,
		Activity: "activity.notify_customer_by_email_and_sms_with_a_very_long_name", Reason: event.ReasonUpstreamFailed})
	return s.evs
}

// manyActivities is a plan of n retrying activities.
func manyActivities(n int) []event.Event {
	acts := make([]event.ActivityInfo, n)
	for i := range acts {
		acts[i] = act(fmt.Sprintf("step_%04d", i), "http", 0)
	}
	return plan(acts...).evs
}

// richRun is allStates with what the newer views show: captured output on
// validate_order_payload's attempts, a long multi-line error on refund, an
// activity with two retry rules (the 429 rule speaks) and one whose first
// attempt was interrupted. Rows: 0-7 as allStates, 8 poll_rates,
// 9 migrate_db.
func richRun() []event.Event {
	evs := allStates()
	stderr := "validating order 1001\nerror: field \"amount\" is missing\n\tat payload.items[2]\x1b[31m (red)\x1b[0m\n"
	for i := range evs {
		ev := &evs[i]
		switch {
		case ev.Activity == "activity.validate_order_payload" && ev.Type == event.AttemptFailed:
			ev.Output = event.NewOutput("checking order 1001\n", stderr, "")
			ev.Error.Message = "exit status 1; stderr: error: field \"amount\" is missing"
		case ev.Activity == "activity.validate_order_payload" && ev.Type == event.AttemptSucceeded:
			ev.Output = event.NewOutput("checking order 1001\n{\"valid\": true}\n", "", "")
		case ev.Activity == "activity.refund" && ev.Error != nil:
			ev.Error.Message = "HTTP/1.1 402 Payment Required: {\"error\":\"CardDeclined\",\"message\":\"the card was declined by the issuer; " +
				"ask the customer for another card or another means of payment\"}\nretry-after: none\nrequest id: 7f3c9a2e-1b4d-4e8f-9a6b-2c5d8e1f0a3b"
		}
	}
	s := &scenario{evs: evs}
	two := func(index, counted, all int, on ...string) *event.RuleRef {
		return &event.RuleRef{Index: index, Rules: 2, On: on, Counted: counted, CountedAll: all}
	}
	evs[0].Activities = append(evs[0].Activities, act("poll_rates", "http", 5), act("migrate_db", "exec", 3))
	s.add(time.Second, event.Event{Type: event.AttemptStarted, Activity: "activity.poll_rates", Attempt: 1, MaxAttempts: 5, Rule: two(0, 0, 0)})
	s.add(2*time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.poll_rates", Attempt: 1, MaxAttempts: 5,
		Rule: two(2, 1, 1), Error: &event.Error{Type: "http:503", Message: "service unavailable"}})
	s.add(2*time.Second, event.Event{Type: event.RetryScheduled, Activity: "activity.poll_rates", Attempt: 2, MaxAttempts: 5,
		Rule: two(2, 1, 1), DelayMs: event.Ms(time.Second), DelaySource: "policy"})
	s.add(3*time.Second, event.Event{Type: event.AttemptStarted, Activity: "activity.poll_rates", Attempt: 2, MaxAttempts: 5, Rule: two(2, 1, 1)})
	s.add(4*time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.poll_rates", Attempt: 2, MaxAttempts: 10,
		Rule: two(1, 1, 2, "http:429"), Error: &event.Error{Type: "http:429", Message: "too many requests"}})
	s.add(4*time.Second, event.Event{Type: event.RetryScheduled, Activity: "activity.poll_rates", Attempt: 3, MaxAttempts: 10,
		Rule: two(1, 1, 2, "http:429"), DelayMs: event.Ms(5 * time.Second), DelaySource: "server"})
	s.add(9*time.Second, event.Event{Type: event.AttemptStarted, Activity: "activity.poll_rates", Attempt: 3, MaxAttempts: 10, Rule: two(1, 1, 2, "http:429")})
	one := &event.RuleRef{Index: 1, Rules: 1}
	s.add(0, event.Event{Type: event.AttemptStarted, Activity: "activity.migrate_db", Attempt: 1, MaxAttempts: 3, Rule: one})
	s.add(5*time.Second, event.Event{Type: event.AttemptFailed, Activity: "activity.migrate_db", Attempt: 1, MaxAttempts: 3, Rule: one,
		Error: &event.Error{Type: "interrupted", Message: "the engine stopped while the attempt was running"}})
	s.add(5*time.Second, event.Event{Type: event.RetryScheduled, Activity: "activity.migrate_db", Attempt: 2, MaxAttempts: 3, Rule: one,
		DelayMs: event.Ms(0), DelaySource: "policy"})
	s.add(5*time.Second, event.Event{Type: event.AttemptStarted, Activity: "activity.migrate_db", Attempt: 2, MaxAttempts: 3, Rule: one})
	return s.evs
}
